package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
)

// DefaultStopGrace is how long Stop waits after SIGTERM before SIGKILL when its
// context has no earlier deadline: longer than CoreDNS's lameduck (5 s in
// kubeadm's Corefile) and the API server's own shutdown.
const DefaultStopGrace = 10 * time.Second

// Command is a component process to start inside a network namespace.
type Command struct {
	// Name names the process in messages ("kube-proxy node-1").
	Name string
	// Netns is the named network namespace (under /run/netns) it runs in.
	Netns string
	// Path and Args are the program and its arguments (without argv[0]).
	Path string
	Args []string
	// Env is added to svclab's own environment.
	Env []string
	// Dir is its working directory; empty: svclab's.
	Dir string
	// LogFile receives its stdout and stderr (appended; created if missing).
	LogFile string
}

// Process is a started component. Stop ends it; Done is closed when it has exited
// (for any reason) and been reaped.
type Process struct {
	Name    string
	Netns   string
	LogFile string
	// Started is when the process was forked, for the "ready after" figures.
	Started time.Time

	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, readable once done is closed
	// stopped is set by Stop before its first signal: an exit after it is
	// the lab's doing, not a death.
	stopped atomic.Bool
}

// Start forks c inside c.Netns: the fork happens on a thread switched into the
// namespace (namespaces.Do), and a child starts in its parent thread's network
// namespace, so every socket the component opens is in the lab, never in the root
// namespace. The same locked thread waits for the child, which matters because
// Pdeathsig fires when the forking thread ends: the component is killed if svclab
// dies, and not before. It gets its own process group, so a terminal's Ctrl-C
// reaches svclab, which stops the components in order.
func Start(c Command) (*Process, error) {
	if !namespaces.Exists(c.Netns) {
		return nil, fmt.Errorf("%s: network namespace %s does not exist", c.Name, c.Netns)
	}
	log, err := os.OpenFile(c.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", c.Name, err)
	}
	defer log.Close() // the child holds its own copy
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	p := &Process{Name: c.Name, Netns: c.Netns, LogFile: c.LogFile, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		err := namespaces.Do(c.Netns, func() error {
			p.Started = time.Now()
			if err := cmd.Start(); err != nil {
				return err
			}
			started <- nil
			p.err = cmd.Wait()
			return nil
		})
		if err != nil && cmd.Process == nil {
			started <- err
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("%s: start %s in %s: %w", c.Name, c.Path, c.Netns, err)
	}
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended (nil for exit status 0); call it after Done.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Exited returns an error saying how the process ended if it has, nil while it
// runs: for a wait loop to stop early with the reason (its log's last lines).
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log %s ends:\n%s", p.Name, p.err, p.LogFile, tail(p.LogFile, 20))
	default:
		return nil
	}
}

// Stop sends SIGTERM, waits for the process to exit until DefaultStopGrace has
// passed or ctx ends, whichever comes first, then sends SIGKILL and waits for it
// to be reaped. Signals go to this process only (by its pidfd: never to a reused
// pid). Stop after exit returns at once; an exit caused by Stop is no error.
func (p *Process) Stop(ctx context.Context) error {
	p.stopped.Store(true)
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: SIGTERM: %w", p.Name, err)
	}
	grace := time.NewTimer(DefaultStopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: SIGKILL: %w", p.Name, err)
	}
	<-p.done
	return nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
