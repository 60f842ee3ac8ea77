package vm

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestCloseIdleKeepsWaitingConnection: a guest can connect to its ports, write
// and exit before the runner's accepting goroutines run (CI saw a stand-in
// guest's stdout lost this way). After qemu exits, a listener holding such a
// connection must stay open so that its bytes are read; one with nothing
// waiting must close, so that its goroutine stops waiting.
func TestCloseIdleKeepsWaitingConnection(t *testing.T) {
	dir := t.TempDir()
	paths, ls, err := listenPorts(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	// The guest wrote on svclab.stdout and hung up; nothing was accepted yet.
	c, err := net.Dial("unix", paths["svclab.stdout"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("written before qemu exited\n")); err != nil {
		t.Fatal(err)
	}
	c.Close()

	closeIdle(ls)

	conn, err := ls["svclab.stdout"].Accept()
	if err != nil {
		t.Fatalf("svclab.stdout's waiting connection was dropped: %v", err)
	}
	defer conn.Close()
	if b, err := io.ReadAll(conn); err != nil || string(b) != "written before qemu exited\n" {
		t.Errorf("read %q, %v; want the bytes the guest wrote", b, err)
	}
	for _, name := range []string{"svclab.ctl", "svclab.stderr"} {
		// The deadline turns a listener wrongly left open into an error here
		// rather than a hung test.
		ls[name].SetDeadline(time.Now().Add(time.Second))
		conn, err := ls[name].Accept()
		if err == nil {
			conn.Close()
		}
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s had no connection waiting but was left open (accept: %v)", name, err)
		}
	}
}
