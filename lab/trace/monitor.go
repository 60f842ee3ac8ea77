package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

// tableName is the temporary table of a trace of source port port: one per
// trace, so that two traces in one lab do not share it. The record package
// names it, as it removes the tables of killed traces.
func tableName(port int) string { return record.TraceTable(port) }

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
	// waitErr is the command's end, set before done is closed (and stderr
	// is whole from then on).
	waitErr error
}

// errRuleReplaced: xtables-monitor looks up each traced rule by its handle
// (NFT_MSG_GETRULE) after the packet crossed it, and exits with "error: No
// such file or directory" when the rule is gone by then. A proxy that rewrites
// its chains (iptables-restore --noflush gives the rules new handles) while a
// trace runs ends the trace's monitor this way: the trace is of a ruleset that
// no longer exists, and a new one is needed.
var errRuleReplaced = errors.New("a rule the packet crossed was replaced before xtables-monitor could read it (the proxy rewrote its rules during the trace)")

// monitorCommand is the reader of nftrace events for a method.
func monitorCommand(method string) []string {
	if method == MethodXTMonitor {
		return []string{"xtables-monitor", "--trace"}
	}
	return []string{"nft", "monitor", "trace"}
}

// startMonitor starts argv in the namespace ns and collects its lines.
//
// The monitor must die with the trace, however the trace ends: a SIGKILLed
// trace runs no deferred stop, and a monitor left running holds its namespace
// (after `svclab down` deleted it) and reads trace events forever. Pdeathsig
// (SIGKILL) does that, but the kernel sends it when the *thread* that forked
// the child exits, not the process. namespaces.Do (CNI's ns.Do) gives the
// thread back to the runtime's pool after switching back, and any later
// goroutine that locks a pooled thread and ends without unlocking it (Do
// itself when a switch back fails, namespaces.Create, a library) makes the
// runtime end that thread, and with it the monitor, in the middle of a trace.
// So the monitor is started from a goroutine of its own, locked to its thread
// for the monitor's whole life and never unlocked: it enters ns, starts the
// monitor, reads its output and waits for it; when it returns, the monitor
// has ended and the runtime throws the thread (still in ns) away. No other
// goroutine ever runs on that thread, so it lives exactly as long as the
// monitor needs it, and ends only with the process.
func startMonitor(ns string, argv []string, port int) (*monitor, error) {
	m := &monitor{ns: ns, done: make(chan struct{}), probes: map[int]bool{}}
	m.cmd = exec.Command(argv[0], argv[1:]...)
	m.cmd.Stderr = &m.stderr
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: see above.
		if err := enter(ns); err != nil {
			started <- err
			return
		}
		if err := m.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
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
		m.waitErr = m.cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("netns %s: %s: %w", ns, strings.Join(argv, " "), err)
	}
	return m, nil
}

// enter moves the calling thread, which its goroutine holds locked, into the
// named namespace.
func enter(ns string) error {
	h, err := netns.GetFromPath(namespaces.Path(ns))
	if err != nil {
		return err
	}
	defer h.Close()
	return netns.Set(h)
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

// sync waits until the monitor listens to the kernel's trace events, then sends
// probes through the namespace until it has printed one: then it has read
// every event of a packet sent before the probe (netlink delivers them in
// order). No clock decides that a monitor is too slow: a monitor that has
// joined the trace group receives the probe's events, however long it takes
// to print them (an emulated VM under load took over 5 s), so the wait ends
// when the probe is seen or the monitor dies. A probe is sent again every
// probeInterval in case one was lost to a full socket buffer; hangGuard only
// turns a hang (a monitor that never joins and never exits) into an error.
func (m *monitor) sync(port int) error {
	start := time.Now()
	for {
		joined, err := m.joinedTraceGroup()
		if err != nil {
			return err
		}
		if joined {
			break
		}
		if err := m.wait(10*time.Millisecond, start); err != nil {
			return err
		}
	}
	for {
		sport, err := sendProbe(m.ns, port)
		if err != nil {
			return err
		}
		for end := time.Now().Add(probeInterval); time.Now().Before(end); {
			m.mu.Lock()
			seen := m.probes[sport]
			m.mu.Unlock()
			if seen {
				return nil
			}
			if err := m.wait(10*time.Millisecond, start); err != nil {
				return err
			}
		}
	}
}

const (
	// probeInterval is how often sync sends a probe again.
	probeInterval = time.Second
	// hangGuard ends a sync whose monitor neither joins the trace group nor
	// prints a probe nor exits: far beyond any slow start (seconds in a loaded
	// emulated VM), it only keeps a broken monitor from hanging the trace.
	hangGuard = 2 * time.Minute
)

// wait sleeps d, and fails when the monitor has ended or the sync that
// started at start has lasted hangGuard.
func (m *monitor) wait(d time.Duration, start time.Time) error {
	select {
	case <-m.done:
		return m.ended()
	case <-time.After(d):
	}
	if time.Since(start) > hangGuard {
		return fmt.Errorf("netns %s: %s printed no trace event of a probe in %s", m.ns, strings.Join(m.cmd.Args, " "), hangGuard)
	}
	return nil
}

// ended is the error of a monitor that ended by itself.
func (m *monitor) ended() error {
	said := bytes.TrimSpace(m.stderr.Bytes())
	err := fmt.Errorf("netns %s: %s ended: %s", m.ns, strings.Join(m.cmd.Args, " "), said)
	if filepath.Base(m.cmd.Args[0]) == "xtables-monitor" && bytes.Contains(said, []byte("No such file or directory")) {
		return fmt.Errorf("%w: %w", err, errRuleReplaced)
	}
	return err
}

// nfnlgrpNFTrace is the nfnetlink multicast group of trace events
// (NFNLGRP_NFTRACE, linux/netfilter/nfnetlink.h); /proc/net/netlink shows a
// socket's first 32 groups as a bit mask, group g as bit g-1.
const nfnlgrpNFTrace = 9

// joinedTraceGroup tells whether one of the monitor's netlink sockets has
// joined the trace group: from then on the kernel queues every trace event
// to it. It reads the monitor's own /proc/PID/net/netlink (its namespace's
// netlink sockets) and finds its sockets there by inode.
func (m *monitor) joinedTraceGroup() (bool, error) {
	pid := m.cmd.Process.Pid
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, nil // not started yet, or ended: wait tells which
	}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/netlink", pid))
	if err != nil {
		return false, nil
	}
	return traceSubscriber(string(data), inodes), nil
}

// traceSubscriber tells whether the /proc/net/netlink text table lists a
// NETLINK_NETFILTER socket among inodes that has joined the trace group. Its
// columns: sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode.
func traceSubscriber(table string, inodes map[string]bool) bool {
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[1] != strconv.Itoa(syscall.NETLINK_NETFILTER) || !inodes[f[9]] {
			continue
		}
		groups, err := strconv.ParseUint(f[3], 16, 32)
		if err == nil && groups&(1<<(nfnlgrpNFTrace-1)) != 0 {
			return true
		}
	}
	return false
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
	var exit *exec.ExitError
	if err := m.waitErr; err != nil && !errors.As(err, &exit) {
		m.lines = append(m.lines, "# "+err.Error())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lines
}
