package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/record"
)

// TestLedgerWritesAStaleRecordAgain: a change the record cannot take (its
// directory unusable, as a full /run/svclab makes it) is kept and answered
// for, said stale with the cause; once the directory can be written again,
// the ledger writes the record unasked, and it is no longer stale.
func TestLedgerWritesAStaleRecordAgain(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "runs")
	g := &ledger{dir: dir, rec: &record.Lab{ID: "ledger-abcd", Name: "ledger", Created: time.Now(), Owner: record.Self()}}
	defer g.close()
	// A file where the directory should be: every write fails, as on a
	// full filesystem, and no test needs a mount of its own.
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	death := record.Death{Component: "kube-apiserver on control-plane", PID: 7, Status: "1", At: time.Now()}
	if err := g.Update(func(r *record.Lab) { r.Deaths = append(r.Deaths, death) }); err == nil {
		t.Fatal("the record was written into a file")
	}
	live := liveOf(t, g)
	if live.Stale == nil || !strings.Contains(live.Stale.Err, "not a directory") {
		t.Fatalf("the owner's answer says the record is stale with %+v, want the cause", live.Stale)
	}
	if want := "degraded: kube-apiserver on control-plane exited 1"; !strings.HasPrefix(live.State(), want) {
		t.Errorf("the owner answers %q, want it to start %q", live.State(), want)
	}

	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	// Bounded by a few retries; nothing but the ledger writes the record.
	deadline := time.Now().Add(6 * retryEvery)
	for {
		r, err := record.Find(dir, "ledger-abcd")
		if err == nil && len(r.Deaths) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record was not written again within %s: %v", 6*retryEvery, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if live := liveOf(t, g); live.Stale != nil {
		t.Errorf("the record was written, and is still said stale: %+v", live.Stale)
	}
}

func liveOf(t *testing.T, g *ledger) *record.Lab {
	t.Helper()
	b, err := g.live()
	if err != nil {
		t.Fatal(err)
	}
	var r record.Lab
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}
