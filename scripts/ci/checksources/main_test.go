package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// newRepo makes a git repository in a temporary directory holding a small
// source file, a large file under docs/bench/ (allowed) and a symlink.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	write(t, dir, "main.go", []byte("package main\n"))
	write(t, dir, "docs/bench/results.csv", bytes.Repeat([]byte("1,2,3\n"), 300_000))
	if err := os.Symlink("main.go", filepath.Join(dir, "link.go")); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", ".")
	return dir
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func write(t *testing.T, dir, name string, content []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestCheckSources(t *testing.T) {
	// A real executable: the program true, copied in.
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	elf, err := os.ReadFile(truePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		add  map[string][]byte
		want []string // the paths named, in order
	}{
		{name: "sources only"},
		{name: "ELF binary", add: map[string][]byte{"proxy.test": elf}, want: []string{"proxy.test: an ELF binary"}},
		{name: "ELF under docs/bench", add: map[string][]byte{"docs/bench/tool": elf}, want: []string{"docs/bench/tool: an ELF binary"}},
		{name: "large file", add: map[string][]byte{"data/big.csv": bytes.Repeat([]byte("x"), 1_000_001)},
			want: []string{"data/big.csv: 1.0 MB, over the 1.0 MB allowed outside docs/bench/"}},
		{name: "1 MB exactly", add: map[string][]byte{"data/ok.csv": bytes.Repeat([]byte("x"), 1_000_000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newRepo(t)
			for name, content := range tc.add {
				write(t, dir, name, content)
			}
			git(t, dir, "add", ".")
			problems, err := check(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != len(tc.want) {
				t.Fatalf("problems %q, want %d naming %q", problems, len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(problems[i], want) {
					t.Errorf("problem %q, want it to start %q", problems[i], want)
				}
			}
		})
	}
}

// TestCheckSourcesReadsTheIndex: a binary that is tracked fails even when the
// working tree no longer has it, and one that is not tracked does not.
func TestCheckSourcesReadsTheIndex(t *testing.T) {
	dir := newRepo(t)
	write(t, dir, "tracked.bin", append([]byte("\x7fELF"), make([]byte, 64)...))
	write(t, dir, "untracked.bin", append([]byte("\x7fELF"), make([]byte, 64)...))
	git(t, dir, "add", "tracked.bin")
	if err := os.Remove(filepath.Join(dir, "tracked.bin")); err != nil {
		t.Fatal(err)
	}
	problems, err := check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "tracked.bin: an ELF binary") {
		t.Errorf("problems %q, want only tracked.bin", problems)
	}
}

func TestCheckSourcesOutsideARepository(t *testing.T) {
	if _, err := check(t.TempDir()); err == nil || !strings.Contains(err.Error(), "git ls-files") {
		t.Errorf("check outside a repository: %v, want a git ls-files error", err)
	}
}
