package kube

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/svclab/svclab/lab/internal/nstest"
)

// TestExitStatus holds a component's exit as a kubelet would report it, and
// tells a death from the end Stop asked for: a process killed by its pid from
// outside (as `kill -9` does) died with 137 (killed) and was not stopped; one
// Stop ended was.
func TestExitStatus(t *testing.T) {
	ns := nstest.New(t, "starts processes")
	start := func(name string, args ...string) *Process {
		t.Helper()
		p, err := Start(Command{Name: name, Netns: ns.Name, Path: "/bin/sh", Args: args, LogFile: filepath.Join(t.TempDir(), name+".log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(context.Background()) })
		return p
	}

	killed := start("killed", "-c", "exec sleep 60")
	if s := killed.ExitStatus(); s != "" {
		t.Errorf("a running process: ExitStatus %q, want empty", s)
	}
	if err := syscall.Kill(killed.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-killed.Done()
	if s := killed.ExitStatus(); s != "137 (killed)" || killed.Stopped() {
		t.Errorf("killed by pid: ExitStatus %q, Stopped %t; want 137 (killed), false", s, killed.Stopped())
	}

	exited := start("exited", "-c", "exit 3")
	<-exited.Done()
	if s := exited.ExitStatus(); s != "3" || exited.Stopped() {
		t.Errorf("exit 3: ExitStatus %q, Stopped %t; want 3, false", s, exited.Stopped())
	}

	stopped := start("stopped", "-c", "exec sleep 60")
	if err := stopped.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := stopped.ExitStatus(); s != "143 (terminated)" || !stopped.Stopped() {
		t.Errorf("Stop: ExitStatus %q, Stopped %t; want 143 (terminated), true", s, stopped.Stopped())
	}
}
