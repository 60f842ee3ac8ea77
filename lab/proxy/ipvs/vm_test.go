package ipvs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svclab/svclab/vm"
)

// ranInVM runs the calling test in svclab's VM, whose Debian kernel has IPVS,
// when this kernel has none, and tells the caller it did (the test's work is
// then done): this package's test binary, built static, runs there with
// -test.run selecting that test alone, and its output is logged here. As
// `svclab verify` does for a mode this kernel lacks: the test runs everywhere,
// it never skips. In the VM itself a missing IPVS fails the test.
func ranInVM(t *testing.T) bool {
	t.Helper()
	missing := Available()
	if missing == nil {
		return false
	}
	if os.Getenv("SVCLAB_VM") == "1" {
		t.Fatal(missing)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%v; running this test in svclab's VM needs root", missing)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "ipvs.test")
	build := exec.Command(goBin, "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test binary for svclab's VM: %v\n%s", err, out)
	}
	t.Logf("%v: running %s in svclab's VM", missing, t.Name())
	log := &lineLogger{t: t}
	res, err := vm.Execute(context.Background(), vm.Config{
		Command: []string{"bin/ipvs.test", "-test.run", "^" + t.Name() + "$", "-test.v"},
		Files:   map[string]string{"bin/ipvs.test": bin},
		Timeout: 15 * time.Minute,
		Stdout:  log, Stderr: log, Log: log,
	})
	if err != nil {
		t.Fatalf("svclab's VM: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s failed in svclab's VM (exit status %d); its output is above", t.Name(), res.ExitCode)
	}
	return true
}

// lineLogger logs what the VM streams, a line at a time.
type lineLogger struct {
	t  *testing.T
	mu sync.Mutex
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
