package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestVersionMatchesComponents keeps Version, which names cached binaries and sets
// their version strings, equal to the release components/go.mod pins.
func TestVersionMatchesComponents(t *testing.T) {
	b, err := os.ReadFile("../../components/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("components/go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range f.Require {
		if r.Mod.Path == "k8s.io/kubernetes" {
			found = true
			if r.Mod.Version != Version {
				t.Errorf("components/go.mod requires k8s.io/kubernetes %s, lab/kube.Version is %s", r.Mod.Version, Version)
			}
		}
	}
	if !found {
		t.Errorf("components/go.mod does not require k8s.io/kubernetes")
	}
	// Every staging module is replaced by its release of the same minor version.
	staging := strings.Replace(Version, "v1.", "v0.", 1)
	for _, r := range f.Replace {
		if strings.HasPrefix(r.Old.Path, "k8s.io/") && r.New.Version != staging {
			t.Errorf("components/go.mod replaces %s with %s %s, want %s", r.Old.Path, r.New.Path, r.New.Version, staging)
		}
	}
	if got := Ldflags(); !strings.Contains(got, "gitVersion="+Version) || !strings.Contains(got, "gitMinor=37") {
		t.Errorf("Ldflags() = %q", got)
	}
}

func TestSourceKey(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	key := func() string {
		t.Helper()
		k, err := sourceKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("go.mod", "module x\n")
	write("go.sum", "")
	write("cmd/x/main.go", "package main\n")
	k0 := key()
	write("README.md", "not read by the build")
	write("cmd/x/testdata/f.go", "package ignored")
	if key() != k0 {
		t.Errorf("files the build does not read changed the key")
	}
	write("cmd/x/main.go", "package main\n\nfunc main() {}\n")
	k1 := key()
	if k1 == k0 {
		t.Errorf("a changed .go file kept the key")
	}
	write("go.sum", "x v1 h1:abc\n")
	if key() == k1 {
		t.Errorf("a changed go.sum kept the key")
	}
	// Moving content between files is a change too.
	write("cmd/x/a.go", "package main\n")
	k2 := key()
	write("cmd/x/a.go", "")
	write("cmd/x/b.go", "package main\n")
	if key() == k2 {
		t.Errorf("moving content to another file kept the key")
	}
}

func TestFindSource(t *testing.T) {
	t.Setenv(SourceEnv, "")
	dir, err := findSource()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Abs("../../components")
	if dir != want {
		t.Errorf("findSource() = %s, want %s (walking up from the test's directory)", dir, want)
	}
	t.Setenv(SourceEnv, t.TempDir())
	if _, err := findSource(); err == nil || !strings.Contains(err.Error(), "components/go.mod") {
		t.Errorf("findSource with $%s at an empty directory: %v, want an error naming components/go.mod", SourceEnv, err)
	}
}
