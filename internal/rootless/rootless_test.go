package rootless

import (
	"os"
	"strconv"
	"testing"
)

// A path under /run/svclab in the run's user namespace is under the state
// directory outside; other paths, and every path outside such a run, are the
// same.
func TestHostPath(t *testing.T) {
	t.Setenv(envState, "/run/user/1000/svclab")
	for in, want := range map[string]string{
		"/run/svclab/web-ab12.log":          "/run/user/1000/svclab/web-ab12.log",
		"/run/svclab":                       "/run/user/1000/svclab",
		"/run/svclabx/web.log":              "/run/svclabx/web.log",
		"/run/netns/svclab-web-node-1-ab12": "/run/netns/svclab-web-node-1-ab12",
		"relative/path":                     "relative/path",
	} {
		if got := HostPath(in); got != want {
			t.Errorf("HostPath(%q) = %q, want %q", in, got, want)
		}
	}
	os.Unsetenv(envState)
	if got := HostPath("/run/svclab/web-ab12.log"); got != "/run/svclab/web-ab12.log" {
		t.Errorf("outside a run, HostPath changed the path to %q", got)
	}
}

// The state directory is the user's runtime directory's, or one of the
// user's own under the temporary directory.
func TestStateDir(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	if got := StateDir(); got != "/run/user/1000/svclab" {
		t.Errorf("StateDir() = %q", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", "/scratch")
	if got, want := StateDir(), "/scratch/svclab-"+strconv.Itoa(os.Getuid()); got != want {
		t.Errorf("StateDir() = %q, want %q", got, want)
	}
}
