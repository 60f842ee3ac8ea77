package record

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// One unparsable record hides no other lab: Scan names it apart, List and
// Find go on with the rest.
func TestACorruptRecordIsSkipped(t *testing.T) {
	dir := t.TempDir()
	good := &Lab{ID: "web-abcd", Name: "web", Created: time.Now()}
	if err := Write(dir, good); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken-wxyz.json"), []byte(`{"id": "broken-wx`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other-wxyz.json"), []byte(`{"id": "web-abcd"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, bad, err := Scan(dir)
	if err != nil || len(recs) != 1 || recs[0].ID != good.ID {
		t.Fatalf("Scan = %v, %v", recs, err)
	}
	if len(bad) != 2 || !strings.Contains(bad[0].Error(), "broken-wxyz.json is corrupt") || !strings.Contains(bad[1].Error(), `records lab "web-abcd", not "other-wxyz"`) {
		t.Errorf("corrupt records: %v", bad)
	}
	if r, err := Find(dir, "web"); err != nil || r.ID != good.ID {
		t.Errorf("Find(web) beside a corrupt record = %v, %v", r, err)
	}
}

// A failed write leaves no temporary file; a temporary file's name says its
// lab and its writer.
func TestWriteLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	// The record's place is taken by a directory: the rename fails.
	if err := os.MkdirAll(filepath.Join(dir, "web-abcd.json", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, &Lab{ID: "web-abcd"}); err == nil {
		t.Fatal("Write over a directory succeeded")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Errorf("a failed write left %v", left)
	}
	for name, want := range map[string]struct {
		id  string
		pid int
	}{"web-abcd.json.4242.tmp": {"web-abcd", 4242}, "web-abcd.json.tmp": {"web-abcd", 0}} {
		id, pid, ok := tmpOf(name)
		if !ok || id != want.id || pid != want.pid {
			t.Errorf("tmpOf(%s) = %q, %d, %v", name, id, pid, ok)
		}
	}
}

// clean's sweep of dir: a stray run directory and a temporary file whose
// writer is gone go, with no error (it once said `%!w(<nil>)`); a running
// lab's directory and a record being written by a live process stay.
func TestRemoveStrayDirs(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{ // name: stays
		"stray-abcd": false, "web-abcd": true,
		fmt.Sprintf("stray-abcd.json.%d.tmp", gone.Process.Pid): false,
		fmt.Sprintf("new-wxyz.json.%d.tmp", os.Getpid()):        true,
		"old-wxyz.json.tmp": false,
	}
	for name := range names {
		var err error
		if strings.HasSuffix(name, ".tmp") {
			err = os.WriteFile(filepath.Join(dir, name), nil, 0o644)
		} else {
			err = os.Mkdir(filepath.Join(dir, name), 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeStrayDirs(dir, entries, []string{"web-abcd"}); err != nil {
		t.Errorf("removeStrayDirs = %v", err)
	}
	for name, stays := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != stays {
			t.Errorf("%s: stays %v, want %v", name, err == nil, stays)
		}
	}
}
