package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A lab's record is written anew on every change, through a new file: when
// the run directory is full (a tmpfs such as /run, which etcd's log may fill)
// it cannot be, and the file on disk goes on saying what was true before. So
// the owner of a running lab also answers for it on a unix socket in the lab's
// run directory, bound when the lab starts: a bound socket takes no room to
// connect to, whatever happens to the filesystem later, and the answer is the
// record the owner holds, with, when the file on disk is behind it, since when
// and why (Stale). `svclab ls` and `svclab inspect` ask the owner first.

// socketName is the owner's socket in the lab's run directory.
const socketName = "owner.sock"

func socketPath(dir, id string) string { return filepath.Join(RunDir(dir, id), socketName) }

// liveWait bounds how long `ls` waits for an owner's answer: an owner that
// does not answer within it (stopped, or far too busy) leaves the record on
// disk to speak for it.
const liveWait = 2 * time.Second

// Stale says that the record on disk is behind its lab: since when the owner
// could not write it, and why.
type Stale struct {
	Since time.Time `json:"since"`
	// Err is the cause as the kernel says it ("no space left on device");
	// the owner's log has the whole error.
	Err string `json:"error"`
}

// NewStale is the staleness that err, a failed write of the record, starts at
// since.
func NewStale(since time.Time, err error) *Stale {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &Stale{Since: since, Err: errno.Error()}
	}
	return &Stale{Since: since, Err: err.Error()}
}

func (s *Stale) String() string {
	return "record stale since " + s.Since.Local().Format("15:04:05") + ": " + s.Err
}

// State is what `svclab ls` and `svclab inspect` say of a lab whose owner
// runs: its health, and, when the record on disk is behind the lab, that it
// is and why.
func (r *Lab) State() string {
	if r.Stale == nil {
		return r.Health()
	}
	return r.Health() + " (" + r.Stale.String() + ")"
}

// Server answers for a running lab on its owner's socket.
type Server struct {
	ln   *net.UnixListener
	path string
	done sync.WaitGroup
}

// Serve listens on the owner's socket of lab id, in its run directory under
// dir (which must exist), and answers every connection with the JSON record
// that state returns, as the owner holds it now.
func Serve(dir, id string, state func() ([]byte, error)) (*Server, error) {
	path := socketPath(dir, id)
	// A socket left by an earlier owner of the same ID (killed before its
	// teardown) would make the bind fail.
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("lab %s: owner's socket: %w", id, err)
	}
	// Connecting takes write permission: `ls` and `inspect` need no root,
	// and read no more than the record, which is world-readable too.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("lab %s: owner's socket: %w", id, err)
	}
	s := &Server{ln: ln, path: path}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// A transient failure (out of descriptors): the next
				// connection may be served.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			go answer(c, state)
		}
	}()
	return s, nil
}

// answer writes the record to one asker and hangs up.
func answer(c *net.UnixConn, state func() ([]byte, error)) {
	defer c.Close()
	b, err := state()
	if err != nil {
		return
	}
	c.SetWriteDeadline(time.Now().Add(liveWait))
	c.Write(b)
}

// Close stops answering and removes the socket.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.done.Wait()
	return err
}

// Live asks the owner of r, which runs, for the lab as it holds it: the
// record with its latest changes, Stale set when the file on disk is behind
// it. It fails when there is no such owner to ask (an svclab that did not
// serve, or an owner that is gone or does not answer in time); r then says
// what is known.
func Live(dir string, r *Lab) (*Lab, error) {
	path := socketPath(dir, r.ID)
	d := net.Dialer{Timeout: liveWait}
	c, err := d.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// Whoever answers must be the lab's owner: a socket left by an earlier
	// process would refuse the connection, but the run directory is
	// checked, not trusted.
	if err := checkPeer(c.(*net.UnixConn), r.Owner); err != nil {
		return nil, fmt.Errorf("lab %s: %s: %w", r.ID, path, err)
	}
	c.SetReadDeadline(time.Now().Add(liveWait))
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, fmt.Errorf("lab %s: %s: %w", r.ID, path, err)
	}
	var live Lab
	if err := json.Unmarshal(b, &live); err != nil {
		return nil, fmt.Errorf("lab %s: %s: %w", r.ID, path, err)
	}
	if live.ID != r.ID || live.Owner != r.Owner {
		return nil, fmt.Errorf("lab %s: %s answers for lab %s of process %d", r.ID, path, live.ID, live.Owner.PID)
	}
	return &live, nil
}

// checkPeer fails unless the process at the other end of c is owner.
func checkPeer(c *net.UnixConn, owner Process) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return credErr
	}
	if int(cred.Pid) != owner.PID {
		return fmt.Errorf("answered by process %d, not the lab's owner %d", cred.Pid, owner.PID)
	}
	return nil
}

// Fresh is r as its owner holds it when the owner runs and answers, else r as
// recorded.
func Fresh(dir string, r *Lab) *Lab {
	if !r.Owner.Alive() {
		return r
	}
	if live, err := Live(dir, r); err == nil {
		return live
	}
	return r
}
