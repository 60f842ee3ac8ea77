package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A flag's value that is a name stays a name in the guest even when a file of
// that name is in the working directory (verify in the VM once sent
// `--proxy /svclab/input/6/svclab`, run from a directory holding a binary
// called svclab); a file given to -f is copied in.
func TestToGuestKeepsNames(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, f := range []string{"svclab", "ipvs", "lab.yaml"} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"verify", "--mode", "ipvs", "--file", "lab.yaml", "--proxy", "svclab", "--json"}
	got, files := toGuest(args)
	want := []string{"verify", "--mode", "ipvs", "--file", "/svclab/input/4/lab.yaml", "--proxy", "svclab", "--json"}
	if !slices.Equal(got, want) {
		t.Errorf("toGuest(%q) = %q, want %q", args, got, want)
	}
	if len(files) != 1 || files["input/4/lab.yaml"] != filepath.Join(dir, "lab.yaml") {
		t.Errorf("files = %v, want only lab.yaml", files)
	}
}
