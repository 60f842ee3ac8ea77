package vm_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svclab/svclab/vm"
)

// These tests boot real VMs (a few seconds each under TCG), so there are few of
// them and each checks a lot. They need root (the cache in /var/cache/svclab, apt)
// and qemu; without either they fail, they do not skip.

func requireVMHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("vm tests need root: run them as root (sudo go test ./vm/)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("vm tests need qemu-system-x86_64: run scripts/setup.sh (Debian package qemu-system-x86)")
	}
}

// isolateTemp points TMPDIR at a directory of the test's own, so the test can
// check that a run leaves no temporary files and no qemu behind.
func isolateTemp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	return dir
}

func checkNothingLeft(t *testing.T, tmp string) {
	t.Helper()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in temp dir: %s", e.Name())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err == nil && bytes.Contains(cmdline, []byte(tmp)) {
			t.Errorf("process still running: %s: %s", p, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}

type logWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (l *logWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// syncBuffer is a bytes.Buffer safe for the runner's stream goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestVMRunsGuestChecks(t *testing.T) {
	requireVMHost(t)
	bin := vm.BuildTestProgram(t, "guestcheck", "guestcheck")
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "input.txt"), []byte("from-the-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := isolateTemp(t)
	outDir := filepath.Join(t.TempDir(), "out")
	var stdout, stderr syncBuffer
	res, err := vm.Execute(context.Background(), vm.Config{
		Command: []string{"bin/guestcheck"},
		Files:   map[string]string{"bin/guestcheck": bin, "data": data},
		Env:     map[string]string{"GUESTCHECK_TOKEN": "tok 'quoted' $HOME"},
		OutDir:  outDir,
		Timeout: 5 * time.Minute,
		Stdout:  &stdout,
		Stderr:  &stderr,
		Log:     &logWriter{t: t},
	})
	t.Logf("guest stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("Execute: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("kernel %s, accel %s: prepare %s, booted %s, command started %s, total %s",
		res.Kernel.Release, res.Accel, res.Prepare, res.Booted, res.Started, res.Total)
	if res.ExitCode != 0 {
		t.Errorf("guestcheck exited %d; stderr:\n%s", res.ExitCode, stderr.String())
	}
	for _, want := range []string{
		"ok ip_vs in /proc", "ok ipvsadm list", "ok ipset create", "ok conntrack list", "ok nft list json",
		"ok nft masquerade random-fully", "ok legacy masquerade random-fully",
		"ok nft recent", "ok legacy ctstate INVALID",
		"input=from-the-host token=tok 'quoted' $HOME wd=/svclab",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("guest stdout lacks %q", want)
		}
	}
	if strings.Contains(stdout.String(), "goes to stderr only") {
		t.Error("the command's stderr reached Stdout")
	}
	if !strings.Contains(stderr.String(), "guestcheck: this line goes to stderr only") {
		t.Errorf("the command's stderr did not reach Stderr: %q", stderr.String())
	}
	for _, s := range []string{stdout.String(), stderr.String()} {
		if strings.Contains(s, "Linux version") || strings.Contains(s, "svclab booted") {
			t.Errorf("kernel console or control traffic leaked into the command's output: %q", s)
		}
	}
	result, err := os.ReadFile(filepath.Join(outDir, "result.txt"))
	if err != nil {
		t.Errorf("guest /out/result.txt did not reach OutDir: %v", err)
	} else if string(result) != "failed=0\n" {
		t.Errorf("/out/result.txt = %q", result)
	}
	if res.Accel != vm.AccelKVM && res.Accel != vm.AccelTCG {
		t.Errorf("Result.Accel = %q", res.Accel)
	}
	checkNothingLeft(t, tmp)
}

func TestVMReturnsExitStatus(t *testing.T) {
	requireVMHost(t)
	tmp := isolateTemp(t)
	var stdout syncBuffer
	code, err := vm.Run(context.Background(), vm.Config{
		Command: []string{"sh", "-c", "echo before-exit; exit 7"},
		Timeout: 5 * time.Minute,
		Stdout:  &stdout,
		Log:     &logWriter{t: t},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if code != 7 {
		t.Errorf("exit status %d, want 7", code)
	}
	if stdout.String() != "before-exit\n" {
		t.Errorf("stdout %q, want %q", stdout.String(), "before-exit\n")
	}
	checkNothingLeft(t, tmp)
}

func TestVMTimeoutKillsGuest(t *testing.T) {
	requireVMHost(t)
	tmp := isolateTemp(t)
	// The timeout must hit the running command, not a slow boot, for this test
	// to show that a running guest is killed. How long a TCG boot takes depends
	// on the machine and its load (3 s to over 27 s seen), so a timeout that
	// passes during boot is doubled and the run tried again.
	for timeout := 30 * time.Second; ; timeout *= 2 {
		var stdout syncBuffer
		start := time.Now()
		code, err := vm.Run(context.Background(), vm.Config{
			Command: []string{"sh", "-c", "echo sleeping; exec sleep 3600"},
			Timeout: timeout,
			Stdout:  &stdout,
			Log:     &logWriter{t: t},
		})
		took := time.Since(start)
		t.Logf("Run with timeout %s returned after %s: %v", timeout, took.Round(time.Millisecond), err)
		if !errors.Is(err, vm.ErrTimeout) {
			t.Fatalf("Run error %v, want one wrapping vm.ErrTimeout", err)
		}
		if code != -1 {
			t.Errorf("exit status %d after a timeout, want -1", code)
		}
		checkNothingLeft(t, tmp)
		if strings.Contains(stdout.String(), "sleeping") && strings.Contains(err.Error(), "running the command") {
			return
		}
		if timeout >= 4*time.Minute {
			t.Fatalf("the timeout never hit the running command: stdout %q, error %v", stdout.String(), err)
		}
	}
}

// cancelOn cancels a context when a marker appears in what is written to it.
type cancelOn struct {
	syncBuffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.syncBuffer.Write(p)
	if strings.Contains(c.String(), c.marker) {
		c.cancel()
	}
	return n, err
}

func TestVMContextCancelKillsGuest(t *testing.T) {
	requireVMHost(t)
	tmp := isolateTemp(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	errStop := errors.New("test is done with the guest")
	stdout := &cancelOn{marker: "sleeping", cancel: func() { cancel(errStop) }}
	code, err := vm.Run(ctx, vm.Config{
		Command: []string{"sh", "-c", "echo sleeping; exec sleep 3600"},
		Timeout: 5 * time.Minute,
		Stdout:  stdout,
		Log:     &logWriter{t: t},
	})
	t.Logf("Run: %v", err)
	if !errors.Is(err, errStop) {
		t.Fatalf("Run error %v, want one wrapping the cancel cause", err)
	}
	if code != -1 {
		t.Errorf("exit status %d after cancel, want -1", code)
	}
	checkNothingLeft(t, tmp)
}
