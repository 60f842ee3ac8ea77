package record

import (
	"os/exec"
	"testing"
	"time"
)

// TestProcessAliveZombie: a lab owner killed with SIGKILL is a zombie until its
// parent reaps it, and already serves nothing; it must count as gone at once.
// The child here is killed and not waited for, so it stays a zombie while the
// test looks at it.
func TestProcessAliveZombie(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	defer func() {
		if !reaped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	st, err := readStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	p := Process{PID: cmd.Process.Pid, Start: st.start}
	if !p.Alive() {
		t.Fatalf("running child %d (state %c) is not Alive", p.PID, st.state)
	}
	if other := (Process{PID: p.PID, Start: p.Start + 1}); other.Alive() {
		t.Error("a process with another start time counts as the recorded one")
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// SIGKILL takes effect asynchronously; wait for the kernel to make the child
	// a zombie (this bounds a wait, it measures nothing).
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err = readStat(p.PID)
		if err != nil {
			t.Fatalf("child %d vanished before it was reaped: %v", p.PID, err)
		}
		if st.state == 'Z' || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.state != 'Z' {
		t.Fatalf("killed child %d is in state %c, not a zombie", p.PID, st.state)
	}
	if p.Alive() {
		t.Errorf("zombie %d counts as alive", p.PID)
	}

	cmd.Wait()
	reaped = true
	if p.Alive() {
		t.Errorf("reaped child %d counts as alive", p.PID)
	}
}

// TestHealth holds what `svclab ls` says of a lab whose components all run and
// of one whose components died.
func TestHealth(t *testing.T) {
	r := &Lab{}
	if h := r.Health(); h != "running" {
		t.Errorf("no deaths: %q, want running", h)
	}
	r.Deaths = []Death{{Component: "kube-proxy on node-1", Status: "137 (killed)"}, {Component: "kube-apiserver on control-plane", Status: "1"}}
	if h, want := r.Health(), "degraded: kube-proxy on node-1 exited 137 (killed); kube-apiserver on control-plane exited 1"; h != want {
		t.Errorf("two deaths: %q, want %q", h, want)
	}
	now := time.Now()
	r.Deaths[0].Restarted = &now
	if h, want := r.Health(), "degraded: kube-apiserver on control-plane exited 1"; h != want {
		t.Errorf("one of two restarted: %q, want %q", h, want)
	}
	r.Deaths[1].Restarted = &now
	r.Deaths = append(r.Deaths, Death{Component: "kube-proxy on node-1", Status: "2", Restarted: &now})
	if h, want := r.Health(), "running (restarts: kube-proxy on node-1 2, kube-apiserver on control-plane 1)"; h != want {
		t.Errorf("all restarted: %q, want %q", h, want)
	}
}
