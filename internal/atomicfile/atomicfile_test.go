package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteReplacesWhole: the new content replaces the old with the mode asked
// for, and no temporary file stays beside it.
func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "out.yaml")
	if err := os.WriteFile(file, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(file, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil || string(got) != "new\n" {
		t.Fatalf("file holds %q (%v), want \"new\\n\"", got, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the file alone", len(entries))
	}
}

// TestFailedWriteLeavesTheOldFile: a write that cannot finish (the target is
// a directory, so the rename fails after the data was written) leaves what
// was there and no temporary file.
func TestFailedWriteLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "taken")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "keep"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("new\n"), 0o644); err == nil {
		t.Fatal("a write over a non-empty directory succeeded")
	}
	if got, err := os.ReadFile(filepath.Join(target, "keep")); err != nil || string(got) != "mine" {
		t.Errorf("the directory's file holds %q (%v)", got, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the target alone", len(entries))
	}
}
