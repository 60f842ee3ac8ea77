package rootless

import (
	"os"
	"strconv"
	"strings"
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

// /etc/subuid as shadow's useradd and usermod write it: by name, or by uid;
// the first of the user's ranges is taken; a malformed line of the user is an
// error naming it.
func TestParseRanges(t *testing.T) {
	file := "# comment\nalice:100000:65536\n1001:300000:1000\nbob:165536:65536\nbob:400000:10\n"
	for _, c := range []struct {
		name string
		id   int
		want idRange
		ok   bool
	}{
		{"alice", 1000, idRange{100000, 65536}, true},
		{"bob", 1002, idRange{165536, 65536}, true},
		{"carol", 1001, idRange{300000, 1000}, true},
		{"dave", 1003, idRange{}, false},
		{"", 1001, idRange{300000, 1000}, true},
	} {
		got, ok, err := parseRanges(strings.NewReader(file), c.name, c.id)
		if err != nil || ok != c.ok || got != c.want {
			t.Errorf("%s (%d): %v %v %v, want %v %v", c.name, c.id, got, ok, err, c.want, c.ok)
		}
	}
	if _, _, err := parseRanges(strings.NewReader("alice:x:65536\n"), "alice", 1000); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a malformed line: %v", err)
	}
}
