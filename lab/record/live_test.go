package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLiveAnswersWithTheOwnersRecord: `ls` asks a running lab's owner, which
// answers with the record it holds, stale or not; a record that names
// another owner, or a lab whose owner does not serve, is not answered for.
func TestLiveAnswersWithTheOwnersRecord(t *testing.T) {
	dir := t.TempDir()
	onDisk := &Lab{ID: "live-abcd", Name: "live", Created: time.Now(), Owner: Self()}
	if err := Write(dir, onDisk); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(RunDir(dir, onDisk.ID), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Live(dir, onDisk); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Live before the owner serves: %v, want a missing socket", err)
	}
	if got := Fresh(dir, onDisk); got != onDisk {
		t.Fatalf("Fresh without an answer is %+v, want the record on disk", got)
	}

	held := *onDisk
	held.Deaths = []Death{{Component: "kube-apiserver on control-plane", PID: 42, Status: "1", At: time.Now()}}
	full := fmt.Errorf("record lab %s: %w", held.ID, &fs.PathError{Op: "write", Path: "x.tmp", Err: syscall.ENOSPC})
	held.Stale = NewStale(time.Date(2026, 12, 7, 1, 23, 45, 0, time.Local), full)
	s, err := Serve(dir, held.ID, func() ([]byte, error) { return json.Marshal(&held) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	live, err := Live(dir, onDisk)
	if err != nil {
		t.Fatal(err)
	}
	want := "degraded: kube-apiserver on control-plane exited 1 (record stale since 01:23:45: no space left on device)"
	if got := live.State(); got != want {
		t.Errorf("State() = %q, want %q", got, want)
	}
	if got := Fresh(dir, onDisk).State(); got != want {
		t.Errorf("Fresh(...).State() = %q, want %q", got, want)
	}
	if got := onDisk.State(); got != "running" {
		t.Errorf("the record on disk says %q, want running", got)
	}

	// The socket answers for its own process only: a record naming another
	// owner (a later lab of the same ID) is not answered for by it.
	other := *onDisk
	other.Owner = ProcessOf(os.Getppid())
	if _, err := Live(dir, &other); err == nil || !strings.Contains(err.Error(), "not the lab's owner") {
		t.Errorf("Live for another owner: %v, want a refusal naming the owner", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(socketPath(dir, onDisk.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is left after Close: %v", err)
	}
}
