package namespaces_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
)

// execHelper, when set, makes this test binary the process that calls Exec: Exec
// replaces its caller, so it runs in a child.
const execHelper = "SVCLAB_TEST_EXEC_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(execHelper); spec != "" {
		// netns|source (empty: no bind)|argv...
		f := strings.Split(spec, "|")
		var binds []namespaces.Bind
		if f[1] != "" {
			binds = append(binds, namespaces.Bind{Source: f[1], Target: "/etc/resolv.conf"})
		}
		err := namespaces.Exec(f[0], f[2:], []string{"PATH=" + os.Getenv("PATH"), "EXTRA=1"}, binds...)
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestExec: the command runs inside the namespace with the environment given,
// sees a bound file in place of /etc/resolv.conf, and nothing outside it
// changes: the host's /etc/resolv.conf and mount table are as they were.
func TestExec(t *testing.T) {
	ns := nstest.New(t, "runs a command")
	file := filepath.Join(t.TempDir(), "resolv.conf")
	const content = "search default.svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	hostResolv, hostErr := os.ReadFile("/etc/resolv.conf")
	// The host's mounts, less the network namespaces' (other packages' tests,
	// which go test runs beside this one, add and remove theirs meanwhile).
	mounts := func() string {
		b, err := os.ReadFile("/proc/1/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, " "+namespaces.Dir+"/") {
				kept = append(kept, line)
			}
		}
		return strings.Join(kept, "\n")
	}
	before := mounts()
	run := func(source string, argv ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), execHelper+"="+strings.Join(append([]string{ns.Name, source}, argv...), "|"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v: %s", argv, err, stderr.String())
		}
		return string(out)
	}

	if got := run(file, "cat", "/etc/resolv.conf"); got != content {
		t.Errorf("the command read /etc/resolv.conf as\n%s\nwant\n%s", got, content)
	}
	// It runs in the namespace: its network devices are the namespace's (lo only).
	if got := run(file, "cat", "/proc/self/net/dev"); !strings.Contains(got, "lo:") || strings.Count(got, ":") != 1 {
		t.Errorf("the command's network devices are not the namespace's:\n%s", got)
	}
	if got := run(file, "env"); !strings.Contains(got, "EXTRA=1\n") {
		t.Errorf("the command's environment lacks EXTRA=1:\n%s", got)
	}
	// Without binds, nothing is bound.
	if hostErr == nil {
		if got := run("", "cat", "/etc/resolv.conf"); got != string(hostResolv) {
			t.Errorf("without a bind the command read\n%s\nwant the host's\n%s", got, hostResolv)
		}
	}
	after, err := os.ReadFile("/etc/resolv.conf")
	if hostErr == nil && (err != nil || !bytes.Equal(after, hostResolv)) {
		t.Errorf("the host's /etc/resolv.conf changed: %q, was %q (%v)", after, hostResolv, err)
	}
	if m := mounts(); m != before || strings.Contains(m, file) {
		t.Errorf("the host's mount table changed:\nbefore\n%s\nafter\n%s", before, m)
	}
}
