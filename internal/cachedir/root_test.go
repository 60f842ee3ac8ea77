package cachedir

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRootChoice walks Root's order of choice: the environment variable, root's
// System, $XDG_CACHE_HOME, an existing home, /tmp.
func TestRootChoice(t *testing.T) {
	home := t.TempDir()
	tmp := os.TempDir()
	for _, c := range []struct {
		name string
		euid int
		env  map[string]string
		want string
	}{
		{"env first, even as root", 0, map[string]string{Env: "/home/u/.cache/svclab", "XDG_CACHE_HOME": "/x"}, "/home/u/.cache/svclab"},
		{"env first as a user", 1000, map[string]string{Env: "/c", "HOME": home}, "/c"},
		{"root keeps System", 0, map[string]string{"XDG_CACHE_HOME": "/x", "HOME": home}, System},
		{"XDG_CACHE_HOME", 1000, map[string]string{"XDG_CACHE_HOME": "/x", "HOME": home}, "/x/svclab"},
		{"relative XDG_CACHE_HOME is ignored", 1000, map[string]string{"XDG_CACHE_HOME": "x", "HOME": home}, filepath.Join(home, ".cache", "svclab")},
		{"home", 1000, map[string]string{"HOME": home}, filepath.Join(home, ".cache", "svclab")},
		{"home that does not exist (nobody)", 65534, map[string]string{"HOME": "/nonexistent"}, filepath.Join(tmp, "svclab-cache-65534")},
		{"no home at all", 1000, nil, filepath.Join(tmp, "svclab-cache-1000")},
	} {
		getenv := func(k string) string { return c.env[k] }
		if got := root(c.euid, c.euid, getenv, isDir); got != c.want {
			t.Errorf("%s: root = %s, want %s", c.name, got, c.want)
		}
	}
	wd, _ := os.Getwd()
	if got := root(1000, 1000, func(k string) string { return map[string]string{Env: "rel"}[k] }, isDir); got != filepath.Join(wd, "rel") {
		t.Errorf("relative $%s: %s, want it made absolute", Env, got)
	}
}

// TestRootOfThisProcess: Root reads this process's environment and euid.
func TestRootOfThisProcess(t *testing.T) {
	t.Setenv(Env, "/somewhere/svclab")
	if got := Root(); got != "/somewhere/svclab" {
		t.Errorf("with $%s: %s", Env, got)
	}
	t.Setenv(Env, "")
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	want := filepath.Join(xdg, "svclab")
	if os.Geteuid() == 0 {
		want = System // root's cache stays where it was, whatever the environment
	}
	if got := Root(); got != want {
		t.Errorf("euid %d, XDG_CACHE_HOME=%s: %s, want %s", os.Geteuid(), xdg, got, want)
	}
}

// TestRootAsNobody runs this test binary as nobody with HOME=/nonexistent (as
// `su nobody` gives): the cache goes to /tmp/svclab-cache-65534. Root only.
func TestRootAsNobody(t *testing.T) {
	if os.Getenv("SVCLAB_ROOT_HELPER") == "1" {
		os.Stdout.WriteString(Root() + "\n")
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a helper as nobody")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary lives in a directory of root's; nobody needs to run it.
	dir, err := os.MkdirTemp("", "cachedir-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "cachedir.test")
	copyFile(t, exe, bin)
	cmd := exec.Command("setpriv", "--reuid="+nobody.Uid, "--regid="+nobody.Gid, "--clear-groups", bin, "-test.run=^TestRootAsNobody$")
	cmd.Env = []string{"SVCLAB_ROOT_HELPER=1", "HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("setpriv as nobody: %v", err)
	}
	want := filepath.Join(os.TempDir(), "svclab-cache-"+nobody.Uid)
	if got, _, _ := strings.Cut(string(out), "\n"); got != want {
		t.Errorf("as nobody: %q, want %q", got, want)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestFallback(t *testing.T) {
	for _, c := range []struct{ dir, own, system, want string }{
		{"/home/u/.cache/svclab/kube", "/home/u/.cache/svclab/kube", "/var/cache/svclab/kube", "/var/cache/svclab/kube"},
		{"/var/cache/svclab/kube", "/var/cache/svclab/kube", "/var/cache/svclab/kube", ""}, // root
		{"/tmp/test-cache", "/home/u/.cache/svclab/kube", "/var/cache/svclab/kube", ""},    // chosen explicitly
	} {
		if got := Fallback(c.dir, c.own, c.system); got != c.want {
			t.Errorf("Fallback(%s, %s, %s) = %q, want %q", c.dir, c.own, c.system, got, c.want)
		}
	}
}

// TestOwned: a cache directory of this user is trusted; one of another user
// (not root) is refused, naming it.
func TestOwned(t *testing.T) {
	dir := t.TempDir()
	if err := Owned(dir); err != nil {
		t.Errorf("own directory: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o777)
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := Owned(other); err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), strconv.Itoa(65534)) {
		t.Errorf("directory of uid 65534: %v", err)
	}
	if _, err := Lock(t.Context(), other, nil); err == nil {
		t.Errorf("Lock took a directory of another user")
	}
}
