package outdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const manifest = ".svclab-test"

// The run writes summary.md and anything under part/.
func owns(rel string) bool { return rel == "summary.md" || strings.HasPrefix(rel, "part/") }

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// run claims dir, writes the run's files and finishes.
func run(t *testing.T, dir string, files ...string) error {
	t.Helper()
	d, err := Claim(dir, manifest, owns)
	if err != nil {
		return err
	}
	for _, f := range files {
		write(t, filepath.Join(dir, f), "new "+f)
	}
	return d.Finish()
}

// A directory of the user's (a checkout, for `--out .`) is refused and left
// exactly as it was.
func TestClaimRefusesADirectoryOfTheUsers(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "part", "main.go"), "mine")
	err := run(t, dir, "summary.md")
	if err == nil || !strings.Contains(err.Error(), "is not empty and no earlier run wrote it") {
		t.Fatalf("Claim over a user's directory = %v, want refused", err)
	}
	if got := read(t, filepath.Join(dir, "part", "main.go")); got != "mine" {
		t.Errorf("the user's file holds %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, manifest)); err == nil {
		t.Error("a refused directory got a manifest")
	}
}

// A run's own output is rewritten: its old files go (a part it does not write
// this time does not linger), a user's file beside them survives untouched.
func TestRewriteKeepsTheUsersFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := run(t, dir, "summary.md", "part/a/results.csv", "part/b/results.csv"); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "NOTES"), "mine")
	if err := run(t, dir, "summary.md", "part/a/results.csv"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "NOTES")); got != "mine" {
		t.Errorf("the user's file holds %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "part", "b")); !os.IsNotExist(err) {
		t.Errorf("the earlier run's part/b is still there: %v", err)
	}
	want := "part/a/results.csv\nsummary.md\n"
	if got := read(t, filepath.Join(dir, manifest)); !strings.HasSuffix(got, want) || strings.Contains(got, "NOTES") {
		t.Errorf("manifest:\n%s\nwant it to end with\n%s", got, want)
	}
	// A user's file where the run writes is refused, never overwritten.
	write(t, filepath.Join(dir, "part", "c", "x.png"), "mine")
	if err := run(t, dir, "part/c/x.png"); err == nil || !strings.Contains(err.Error(), "part/c/x.png: not written by an earlier run") {
		t.Errorf("Claim over a user's file in the run's place = %v", err)
	}
	if got := read(t, filepath.Join(dir, "part", "c", "x.png")); got != "mine" {
		t.Errorf("the user's file holds %q", got)
	}
}

// A manifest naming a file outside its directory is refused, and a symlink
// planted in the directory cannot make a listed name remove a file elsewhere.
func TestManifestStaysInside(t *testing.T) {
	outside := t.TempDir()
	write(t, filepath.Join(outside, "precious"), "mine")
	dir := t.TempDir()
	write(t, filepath.Join(dir, manifest), "../"+filepath.Base(outside)+"/precious\n")
	if _, err := Claim(dir, manifest, owns); err == nil || !strings.Contains(err.Error(), "is not a path inside") {
		t.Errorf("a manifest naming ../ = %v", err)
	}
	write(t, filepath.Join(dir, manifest), "link/precious\n")
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	// (link itself is a file the manifest does not list; the run does not
	// write there, so it stays.)
	if _, err := Claim(dir, manifest, owns); err == nil {
		t.Error("removing link/precious through a symlink succeeded")
	}
	if got := read(t, filepath.Join(outside, "precious")); got != "mine" {
		t.Errorf("the file outside holds %q", got)
	}
}
