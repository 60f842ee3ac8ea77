package supervise

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/record"
)

// TestDeaths kills a watched process by its pid, as `kill -9` does, and holds
// the supervisor to report it once, with its status, while a process the lab
// stops and one killed after Close are no deaths.
func TestDeaths(t *testing.T) {
	ns := nstest.New(t, "starts processes")
	start := func(name string) *kube.Process {
		t.Helper()
		p, err := kube.Start(kube.Command{Name: name, Netns: ns.Name, Path: "/bin/sh", Args: []string{"-c", "exec sleep 60"},
			LogFile: filepath.Join(t.TempDir(), "log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(context.Background()) })
		return p
	}
	seen := make(chan record.Death, 4)
	s := New(func(d record.Death) { seen <- d })
	before := time.Now()
	killed, stopped, late := start("killed"), start("stopped"), start("late")
	s.Watch("killed on node-1", killed)
	s.Watch("stopped on node-1", stopped)
	s.Watch("late on node-1", late)
	if d := s.Deaths(before); len(d) != 0 {
		t.Fatalf("deaths before any: %v", d)
	}

	if err := stopped.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	if err := syscall.Kill(killed.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-seen:
		t.Logf("%v, seen %s after the kill", d, d.At.Sub(killedAt))
		if d.String() != "killed on node-1 exited 137 (killed)" || d.PID != killed.Pid() {
			t.Errorf("death %+v: want killed on node-1 exited 137 (killed), pid %d", d, killed.Pid())
		}
	case <-time.After(time.Minute):
		t.Fatal("no death reported a minute after SIGKILL")
	}
	if d := s.Deaths(before); len(d) != 1 || d[0].Component != "killed on node-1" {
		t.Errorf("Deaths(before): %v, want the killed one only", d)
	}
	if d := s.Deaths(time.Now()); len(d) != 0 {
		t.Errorf("Deaths(now): %v, want none", d)
	}

	s.Close()
	syscall.Kill(late.Pid(), syscall.SIGKILL)
	<-late.Done()
	select {
	case d := <-seen:
		t.Errorf("reported after Close or for a stopped process: %v", d)
	default:
	}
	if d := s.Deaths(before); len(d) != 1 {
		t.Errorf("Deaths after Close: %v, want the killed one only", d)
	}
}
