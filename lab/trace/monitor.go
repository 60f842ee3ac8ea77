package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
)

// tableName is the temporary table of a trace of source port port: one per
// trace, so that two traces in one lab do not share it.
func tableName(port int) string { return "svclab-trace-" + strconv.Itoa(port) }

// traceTable sets nftrace on the flow's first packet (a TCP SYN, or a UDP
// datagram from the client's port) and on the readiness probes (UDP to
// 127.0.0.1:port), at priority -500: before raw (-300), conntrack and every
// proxy mode's chains, so that all of them are traced. Probes are dropped
// there: their two or three events are all a monitor needs, they make no
// conntrack entry, and a slow monitor (an emulated VM) is not flooded with
// the events of every chain they would cross (its socket overflowed once).
func traceTable(port int, protocol string) string {
	var match string
	if strings.EqualFold(protocol, "UDP") {
		match = fmt.Sprintf("meta l4proto udp th sport %d", port)
	} else {
		match = fmt.Sprintf("meta l4proto tcp th sport %d tcp flags & (syn | ack) == syn", port)
	}
	probe := fmt.Sprintf("ip daddr 127.0.0.1 udp dport %d", port)
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n", tableName(port))
	for _, c := range [][2]string{{"pre", "prerouting"}, {"out", "output"}} {
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook %s priority -500; policy accept;\n", c[0], c[1])
		fmt.Fprintf(&b, "\t\t%s meta nftrace set 1\n\t\t%s meta nftrace set 1 drop\n\t}\n", match, probe)
	}
	b.WriteString("}\n")
	return b.String()
}

// addTable puts the trace table into the namespace ns.
func addTable(ns string, port int, protocol string) error {
	return namespaces.Do(ns, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(traceTable(port, protocol))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft -f -: %w: %s", err, bytes.TrimSpace(out))
		}
		return nil
	})
}

// deleteTable removes the trace table from the namespace ns.
func deleteTable(ns string, port int) error {
	_, err := namespaces.Output(ns, "nft", "delete", "table", "ip", tableName(port))
	return err
}

// monitor is one trace event reader running in a namespace.
type monitor struct {
	ns   string
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	lines  []string
	probes map[int]bool
	stderr bytes.Buffer
}

// monitorCommand is the reader of nftrace events for a method.
func monitorCommand(method string) []string {
	if method == MethodXTMonitor {
		return []string{"xtables-monitor", "--trace"}
	}
	return []string{"nft", "monitor", "trace"}
}

// startMonitor starts argv in the namespace ns and collects its lines.
func startMonitor(ns string, argv []string, port int) (*monitor, error) {
	m := &monitor{ns: ns, done: make(chan struct{}), probes: map[int]bool{}}
	m.cmd = exec.Command(argv[0], argv[1:]...)
	m.cmd.Stderr = &m.stderr
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := namespaces.Do(ns, m.cmd.Start); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			m.mu.Lock()
			if p, ok := probeSport(line, port); ok {
				m.probes[p] = true
			}
			m.lines = append(m.lines, line)
			m.mu.Unlock()
		}
	}()
	return m, nil
}

// probeSport tells whether line is the packet line of a readiness probe to
// 127.0.0.1:port, and from which source port.
func probeSport(line string, port int) (int, bool) {
	p, ok := parsePacketLine(line)
	if !ok || p.Dst.String() != "127.0.0.1" || p.Dport != port {
		return 0, false
	}
	return p.Sport, true
}

// sync sends probes through the namespace until the monitor has printed one:
// then it reads events, and every event of a packet sent before the probe has
// been read (netlink delivers them in order).
func (m *monitor) sync(port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		sport, err := sendProbe(m.ns, port)
		if err != nil {
			return err
		}
		for i := 0; i < 10; i++ {
			m.mu.Lock()
			seen := m.probes[sport]
			m.mu.Unlock()
			if seen {
				return nil
			}
			select {
			case <-m.done:
				return fmt.Errorf("netns %s: %s ended: %s", m.ns, strings.Join(m.cmd.Args, " "), bytes.TrimSpace(m.stderr.Bytes()))
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return fmt.Errorf("netns %s: %s printed no trace event of a probe in %s", m.ns, strings.Join(m.cmd.Args, " "), timeout)
}

// sendProbe sends one UDP datagram to 127.0.0.1:port inside ns and returns its
// source port.
func sendProbe(ns string, port int) (int, error) {
	var sport int
	err := namespaces.Do(ns, func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			return err
		}
		defer c.Close()
		sport = c.LocalAddr().(*net.UDPAddr).Port
		// The trace table drops the probe once traced: the send fails.
		if _, err := c.Write([]byte("svclab trace probe")); err != nil && !errors.Is(err, syscall.EPERM) {
			return err
		}
		return nil
	})
	return sport, err
}

// stop ends the monitor and returns the lines it printed.
func (m *monitor) stop() []string {
	if m.cmd.Process != nil {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	<-m.done
	err := m.cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		m.lines = append(m.lines, "# "+err.Error())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lines
}
