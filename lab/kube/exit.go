package kube

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
)

// Stopped tells whether Stop was called: an exit after it was asked for, one
// before it (or without it) is the process's own or someone else's doing.
func (p *Process) Stopped() bool { return p.stopped.Load() }

// ExitStatus says how the process ended, as a shell and a kubelet's
// containerStatuses do: "0", "1", "137 (killed)" for SIGKILL (128 plus the
// signal); empty while it runs.
func (p *Process) ExitStatus() string {
	select {
	case <-p.done:
	default:
		return ""
	}
	if p.err == nil {
		return "0"
	}
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) {
		return p.err.Error()
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("%d (%v)", 128+int(ws.Signal()), ws.Signal())
	}
	return strconv.Itoa(exit.ExitCode())
}
