package traffic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
)

// DefaultTimeout bounds one attempt when a Dial sets none.
const DefaultTimeout = 2 * time.Second

// Dial says where a client connects from and to.
type Dial struct {
	// From is the network namespace of the lab member the client runs in.
	From string
	// Protocol is "TCP" or "UDP" (case does not matter).
	Protocol string
	To       netip.AddrPort
	// SrcPort fixes the client's source port (0: the kernel picks), for checks that
	// need one conntrack entry or one affinity key across attempts.
	SrcPort int
	// Timeout bounds connecting and each reply.
	Timeout time.Duration
	// Waiting, when set, is told what the client waits for next ("connect",
	// "reply", "close": the server's FIN), so that a caller watching a slow
	// exchange can say where it stands.
	Waiting func(what string)
}

func (d Dial) waiting(what string) {
	if d.Waiting != nil {
		d.Waiting(what)
	}
}

func (d Dial) timeout() time.Duration {
	if d.Timeout <= 0 {
		return DefaultTimeout
	}
	return d.Timeout
}

// network is the socket d dials: its protocol in the family of d.To, "tcp4"
// or "udp6". One family a socket: an IPv4 flow stays an IPv4 socket's in a
// dual-stack lab, as in an IPv4 one.
func (d Dial) network() (string, error) {
	switch strings.ToUpper(d.Protocol) {
	case "TCP", "":
		return "tcp" + family(d.To.Addr()), nil
	case "UDP":
		return "udp" + family(d.To.Addr()), nil
	}
	return "", fmt.Errorf("protocol %q: want TCP or UDP", d.Protocol)
}

func (d Dial) String() string {
	return fmt.Sprintf("%s from %s to %s", strings.ToUpper(d.Protocol), d.From, d.To)
}

// Request makes one short exchange: connect, ask once, read the reply, close. The
// server closes first, so a fixed source port can be reused at once. Keep-alive is
// never used: every Request is a new connection and a new conntrack entry.
func Request(d Dial) (Reply, error) {
	return RequestContext(context.Background(), d)
}

// RequestContext is Request, ended early when ctx ends: its connection is closed
// at once, whatever it waits for (the error is then ctx's). Every wait of an
// exchange is bounded by d's timeout already; ctx lets a caller that bounds a
// whole check end the attempt under way with it.
func RequestContext(ctx context.Context, d Dial) (Reply, error) {
	c, err := OpenContext(ctx, d)
	if err != nil {
		return Reply{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	defer stop()
	r, err := c.ask(onceLine)
	if err != nil {
		if ctx.Err() != nil {
			return r, fmt.Errorf("%s: %w", d, ctx.Err())
		}
		return r, err
	}
	// Wait for the server's FIN before closing, so that the server, not this
	// client, holds TIME_WAIT and the source port is free again at once.
	if _, isTCP := c.conn.(*net.TCPConn); isTCP {
		d.waiting("close")
		io.Copy(io.Discard, c.rd)
	}
	return r, nil
}

// Conn is one long-lived connection (for UDP, one fixed 5-tuple) that can be asked
// again and again, to watch where an established flow goes as rules change.
type Conn struct {
	d    Dial
	conn net.Conn
	rd   *bufio.Reader
}

// Open connects. The socket is created inside d.From's namespace and then used from
// the calling goroutine.
func Open(d Dial) (*Conn, error) { return OpenContext(context.Background(), d) }

// OpenContext is Open, given up when ctx ends.
func OpenContext(ctx context.Context, d Dial) (*Conn, error) {
	network, err := d.network()
	if err != nil {
		return nil, err
	}
	dialer := net.Dialer{Timeout: d.timeout(), Control: reuseAddr}
	if d.SrcPort != 0 {
		if strings.HasPrefix(network, "udp") {
			dialer.LocalAddr = &net.UDPAddr{Port: d.SrcPort}
		} else {
			dialer.LocalAddr = &net.TCPAddr{Port: d.SrcPort}
		}
	}
	var conn net.Conn
	d.waiting("connect")
	err = namespaces.Do(d.From, func() error {
		var err error
		conn, err = dialer.DialContext(ctx, network, hostPort(d.To))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d, err)
	}
	return &Conn{d: d, conn: conn, rd: bufio.NewReader(conn)}, nil
}

// reuseAddr lets a fixed source port be bound again while an earlier socket on it
// lingers.
func reuseAddr(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	return errors.Join(err, serr)
}

// Ask sends a line and waits for the reply, keeping the connection open.
func (c *Conn) Ask() (Reply, error) { return c.ask("HELLO") }

func (c *Conn) ask(line string) (Reply, error) {
	deadline := time.Now().Add(c.d.timeout())
	c.conn.SetDeadline(deadline)
	_, isUDP := c.conn.(*net.UDPConn)
	sendErr := ""
	if _, err := c.conn.Write([]byte(line + "\n")); err != nil {
		if !isUDP || !errors.Is(err, syscall.EPERM) {
			return Reply{}, fmt.Errorf("%s: write: %w", c.d, err)
		}
		// A rule in this namespace's own OUTPUT path stopped the datagram. A
		// REJECT there also sends this socket an ICMP error, which the read
		// below returns as "refused"; a DROP sends nothing and the read times out.
		sendErr = " (the send failed: " + err.Error() + ")"
	}
	var resp []byte
	c.d.waiting("reply")
	if isUDP {
		buf := make([]byte, 2048)
		n, err := c.conn.Read(buf)
		if err != nil {
			return Reply{}, fmt.Errorf("%s: read%s: %w", c.d, sendErr, err)
		}
		resp = buf[:n]
	} else {
		var err error
		resp, err = c.rd.ReadBytes('\n')
		if err != nil {
			return Reply{}, fmt.Errorf("%s: read: %w", c.d, err)
		}
	}
	return parseReply(resp)
}

// Local is the client's own address and port, before any NAT.
func (c *Conn) Local() netip.AddrPort { return addrPort(c.conn.LocalAddr()) }

// Close ends the connection.
func (c *Conn) Close() error { return c.conn.Close() }

// Abort ends a TCP connection with a reset instead of a FIN (SO_LINGER 0), as a
// client that gives up does; the server's end sees ECONNRESET and nothing lingers
// in TIME_WAIT. For UDP it is Close.
func (c *Conn) Abort() error {
	if tc, ok := c.conn.(*net.TCPConn); ok {
		if err := tc.SetLinger(0); err != nil {
			return err
		}
	}
	return c.conn.Close()
}

// Remote is the address the client is connected to, as its socket sees it: the
// ClusterIP or node address it dialled, whatever NAT does in between.
func (c *Conn) Remote() netip.AddrPort { return addrPort(c.conn.RemoteAddr()) }
