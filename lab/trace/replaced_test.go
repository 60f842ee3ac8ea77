package trace

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/svclab/svclab/lab/namespaces"
)

// TestMonitorRuleReplaced: xtables-monitor ends when a rule a traced packet
// crossed is gone before it looks the rule up, as a proxy's rewrite does to a
// trace under way (CI saw it in svclab's VM while the supervision spec's
// restarted API server made the IPVS proxier resync). The monitor's end must
// read as errRuleReplaced, which Run answers with a new attempt; with the rule
// left alone the same steps sync. Real iptables-nft rules and xtables-monitor
// in a throwaway namespace; the monitor is stopped (SIGSTOP) while the packet
// crosses and the rule is replaced, so the order is certain.
func TestMonitorRuleReplaced(t *testing.T) {
	for _, replace := range []bool{false, true} {
		t.Run(fmt.Sprintf("replaced=%v", replace), func(t *testing.T) {
			err := traceWhileStopped(t, replace)
			if replace && !errors.Is(err, errRuleReplaced) {
				t.Fatalf("sync after the rule was replaced: %v; want errRuleReplaced", err)
			}
			if !replace && err != nil {
				t.Fatalf("sync with the rule in place: %v", err)
			}
			if replace {
				t.Logf("%v", err)
			}
		})
	}
}

// traceWhileStopped sends one traced datagram through a filter rule while the
// monitor is stopped, replaces the rule if replace, lets the monitor go on and
// returns what its sync then says.
func traceWhileStopped(t *testing.T, replace bool) error {
	name := fmt.Sprintf("svclab-test-trace-%06d", rand.IntN(1000000))
	if err := namespaces.Create(name); err != nil {
		t.Fatalf("a network namespace (run as root): %v", err)
	}
	defer namespaces.Delete(name)
	ns, err := namespaces.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	const dport = 9999
	port := firstPort + rand.IntN(ports)
	// The chain's rules as a proxy writes them: a restore without flushing
	// the table replaces the chain's rules, which get new handles.
	rules := fmt.Sprintf("*filter\n:SVCLAB-TEST - [0:0]\n-A SVCLAB-TEST -p udp --dport %d -j ACCEPT\nCOMMIT\n", dport)
	restore := func() {
		t.Helper()
		cmd := exec.Command("iptables-nft-restore", "--noflush")
		cmd.Stdin = strings.NewReader(rules)
		if err := ns.Do(func() error {
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		}); err != nil {
			t.Fatalf("iptables-nft-restore: %v", err)
		}
	}
	if out, err := ns.Output("ip", "link", "set", "lo", "up"); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	restore()
	if out, err := ns.Output("iptables-nft", "-A", "OUTPUT", "-j", "SVCLAB-TEST"); err != nil {
		t.Fatalf("iptables-nft -A OUTPUT: %v: %s", err, out)
	}
	if err := addTable(name, port, "UDP"); err != nil {
		t.Fatal(err)
	}
	mon, err := startMonitor(name, monitorCommand(MethodXTMonitor), port)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.stop()
	if err := mon.sync(port); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	if err := mon.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := ns.Do(func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{Port: port}, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: dport})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("traced"))
		return err
	}); err != nil {
		t.Fatalf("the traced datagram: %v", err)
	}
	if replace {
		restore()
	}
	if err := mon.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	return mon.sync(port)
}
