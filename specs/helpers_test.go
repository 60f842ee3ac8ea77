package specs

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// parse reads an inline topology; specs keep their labs next to their checks.
func parse(name, yaml string) *topology.Topology {
	t, err := topology.Parse(name, []byte(strings.TrimSpace(yaml)))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return t
}

func shipped(name string) *topology.Topology {
	t, err := topology.Embedded(name)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return t
}

// upLab builds a lab that is torn down when the enclosing container ends, and whose
// nodes' rules, conntrack tables and routes are written to the spec's output when a
// spec fails.
func upLab(t *topology.Topology, o lab.Options) *lab.Lab {
	if o.Log == nil {
		// The lab's progress and what it did on its own (readiness probes,
		// deaths, restarts, a report retried) are in a failed spec's output.
		o.Log = GinkgoWriter
	}
	l, err := lab.Up(context.Background(), t, o)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(l.Down()).To(Succeed())
	})
	return l
}

// dumpOnFailure registers, in the enclosing container, a dump of the lab after each
// failed spec.
func dumpOnFailure(l **lab.Lab) {
	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && *l != nil {
			GinkgoWriter.Printf("\n===== lab %s after the failure =====\n%s", (*l).ID, (*l).Dump())
		}
	})
}

// netnsOf is the network namespace of a lab member.
func netnsOf(l *lab.Lab, member string) string {
	m, err := l.Member(member)
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
	return m.NetNS
}

// dialer makes Dials from one member with a timeout.
func dial(l *lab.Lab, from, proto, to string, timeout time.Duration) traffic.Dial {
	return traffic.Dial{From: netnsOf(l, from), Protocol: proto, To: netip.MustParseAddrPort(to), Timeout: timeout}
}

// ask makes one short TCP exchange from a member.
func ask(l *lab.Lab, from, to string) (traffic.Reply, error) {
	return traffic.Request(dial(l, from, "TCP", to, 2*time.Second))
}

// outcome classifies one short exchange.
func outcome(l *lab.Lab, from, proto, to string, timeout time.Duration) traffic.Outcome {
	_, err := traffic.Request(dial(l, from, proto, to, timeout))
	return traffic.Classify(err)
}

// refusal is outcome for a flow that must be refused. A refusal is a single ICMP
// error, and a UDP datagram, unlike a TCP SYN, is not sent again: a UDP attempt that
// times out is tried once more a second later, as svclab verify does (see
// refuseAttempts in lab/verify). A flow that is dropped times out both times.
func refusal(l *lab.Lab, from, proto, to string) traffic.Outcome {
	out := outcome(l, from, proto, to, 3*time.Second)
	if out == traffic.Timeout && proto == "UDP" {
		time.Sleep(time.Second)
		out = outcome(l, from, proto, to, 3*time.Second)
	}
	return out
}

// runWithInput runs a program with input on its standard input; call it inside
// namespaces.Do to run it in a member's namespace.
func runWithInput(input string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return nil
}

// ctx bounds the lab changes a spec makes.
func ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	DeferCleanup(cancel)
	return c
}
