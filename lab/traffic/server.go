package traffic

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/namespaces"
)

// bareWait is how long a TCP server waits for a first line before it answers a
// client that sent nothing (`nc IP PORT`, a bare connect); clients that speak first
// are answered at once.
const bareWait = 300 * time.Millisecond

// onceLine asks the server to answer and then close, so that the server holds the
// TIME_WAIT state and a client can reuse a fixed source port straight away.
const onceLine = "ONCE"

var httpRequestLine = regexp.MustCompile(`^[A-Z]+ \S+ HTTP/1\.[01]\r?\n$`)

// Server answers on every declared port of one pod.
type Server struct {
	id        Identity
	listeners []net.Listener
	packets   []net.PacketConn
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// Serve opens a listener for each port inside the named network namespace and
// serves it from goroutines of this process: TCP ports speak HTTP/1.1 and a line
// protocol, UDP ports answer each datagram. A pod with an IPv6 address is
// served in both families (see listens).
func Serve(netns string, id Identity, ports []corev1.ContainerPort) (*Server, error) {
	s := &Server{id: id, conns: map[net.Conn]struct{}{}}
	err := namespaces.Do(netns, func() error {
		for _, p := range ports {
			ls, err := id.listens(p)
			if err != nil {
				return err
			}
			for _, l := range ls {
				if l.proto == "udp" {
					pc, err := net.ListenPacket(l.network, l.addr)
					if err != nil {
						return fmt.Errorf("pod %s: listen udp %s: %w", id.Pod, l.addr, err)
					}
					s.packets = append(s.packets, pc)
					continue
				}
				ln, err := net.Listen(l.network, l.addr)
				if err != nil {
					return fmt.Errorf("pod %s: listen tcp %s: %w", id.Pod, l.addr, err)
				}
				s.listeners = append(s.listeners, ln)
			}
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.start()
	return s, nil
}

// start serves the sockets opened, from goroutines of this process.
func (s *Server) start() {
	for _, l := range s.listeners {
		s.wg.Add(1)
		go s.acceptLoop(l)
	}
	for _, pc := range s.packets {
		s.wg.Add(1)
		go s.udpLoop(pc)
	}
}

// listen is one socket a Server opens for a port: proto is "tcp" or "udp",
// network and addr are as net.Listen takes them.
type listen struct {
	proto, network, addr string
}

// listens are the sockets that serve port p of id: the IPv4 wildcard, as in an
// IPv4-only lab, and, when id has an IPv6 address, the IPv6 wildcard on a
// socket of its own. Go makes a "tcp6" or "udp6" socket IPv6-only
// (IPV6_V6ONLY), so the IPv4 socket and what its replies say are the same
// whether or not the pod has IPv6, and each reply names the address of the
// family it came in on. The IPv6 socket takes the wildcard, as the IPv4 one
// does, rather than the pod's address: it answers on every IPv6 address the
// namespace has, as a pod's server does.
func (id Identity) listens(p corev1.ContainerPort) ([]listen, error) {
	var proto string
	switch p.Protocol {
	case corev1.ProtocolUDP:
		proto = "udp"
	case corev1.ProtocolTCP, "":
		proto = "tcp"
	default:
		return nil, fmt.Errorf("pod %s: port %d: protocol %s is not served", id.Pod, p.ContainerPort, p.Protocol)
	}
	port := strconv.Itoa(int(p.ContainerPort))
	ls := []listen{{proto, proto + "4", ":" + port}}
	if id.IP6.IsValid() {
		ls = append(ls, listen{proto, proto + "6", net.JoinHostPort("::", port)})
	}
	return ls, nil
}

// Close stops the listeners and ends every open connection with a FIN, as a server
// process that exits does.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	for _, l := range s.listeners {
		l.Close()
	}
	for _, pc := range s.packets {
		pc.Close()
	}
	s.wg.Wait()
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) acceptLoop(l net.Listener) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !s.track(c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			defer c.Close()
			s.serveConn(c)
		}()
	}
}

func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort()
	case *net.UDPAddr:
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

// serveConn answers a TCP connection: an HTTP request gets one HTTP response and the
// connection closes; otherwise every line gets a reply line, and a client that says
// nothing gets one reply after bareWait.
func (s *Server) serveConn(c net.Conn) {
	reply := s.id.reply("TCP", addrPort(c.LocalAddr()), addrPort(c.RemoteAddr()))
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(bareWait))
	first := true
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return
		}
		if err != nil {
			var ne net.Error
			if first && len(line) == 0 && errors.As(err, &ne) && ne.Timeout() {
				if _, err := c.Write(reply); err != nil {
					return
				}
				first = false
				c.SetReadDeadline(time.Time{})
				continue
			}
			return
		}
		if first {
			c.SetReadDeadline(time.Time{})
			if httpRequestLine.Match(line) {
				s.serveHTTP(c, io.MultiReader(bytes.NewReader(append([]byte(nil), line...)), br), reply)
				return
			}
		}
		first = false
		if _, err := c.Write(reply); err != nil {
			return
		}
		if strings.TrimSpace(string(line)) == onceLine {
			return
		}
	}
}

func (s *Server) serveHTTP(c net.Conn, r io.Reader, body []byte) {
	req, err := http.ReadRequest(bufio.NewReader(r))
	if err != nil {
		return
	}
	req.Body.Close()
	resp := &http.Response{
		StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Request: req,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Close:         true,
	}
	resp.Write(c)
}

func (s *Server) udpLoop(pc net.PacketConn) {
	defer s.wg.Done()
	buf := make([]byte, 2048)
	local := addrPort(pc.LocalAddr())
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		pc.WriteTo(s.id.reply("UDP", local, addrPort(from)), from)
	}
}
