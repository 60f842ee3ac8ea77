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
// protocol, UDP ports answer each datagram.
func Serve(netns string, id Identity, ports []corev1.ContainerPort) (*Server, error) {
	s := &Server{id: id, conns: map[net.Conn]struct{}{}}
	err := namespaces.Do(netns, func() error {
		for _, p := range ports {
			addr := fmt.Sprintf(":%d", p.ContainerPort)
			switch p.Protocol {
			case corev1.ProtocolUDP:
				pc, err := net.ListenPacket("udp4", addr)
				if err != nil {
					return fmt.Errorf("pod %s: listen udp %s: %w", id.Pod, addr, err)
				}
				s.packets = append(s.packets, pc)
			case corev1.ProtocolTCP, "":
				l, err := net.Listen("tcp4", addr)
				if err != nil {
					return fmt.Errorf("pod %s: listen tcp %s: %w", id.Pod, addr, err)
				}
				s.listeners = append(s.listeners, l)
			default:
				return fmt.Errorf("pod %s: port %d: protocol %s is not served", id.Pod, p.ContainerPort, p.Protocol)
			}
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, l := range s.listeners {
		s.wg.Add(1)
		go s.acceptLoop(l)
	}
	for _, pc := range s.packets {
		s.wg.Add(1)
		go s.udpLoop(pc)
	}
	return s, nil
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
		pc.WriteTo(s.id.reply("UDP", netip.AddrPortFrom(s.id.IP, local.Port()), addrPort(from)), from)
	}
}
