package specs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/topology"
)

// echo6Port is where the spec's own IPv6 servers listen: the lab's pod servers
// speak IPv4 only so far (issue 35), so the spec brings one that answers with
// the source address it saw.
const echo6Port = 9090

// A bare dual-stack network (no proxy mode): IPv6 on every link and route the
// lab builds, beside the IPv4 that every other spec checks.
var _ = Describe("A dual-stack lab network", Ordered, Label("network", "dualstack"), func() {
	var (
		l    *lab.Lab
		top  *topology.Topology
		root map[string]string
	)
	BeforeAll(func() {
		root = rootSysctls6()
		var err error
		top, err = topology.Load("testdata/dualstack.yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(top.DualStack()).To(BeTrue())
		l = upLab(top, lab.Options{})
		// Every member with IPv6 gets a server on its IPv6 address.
		for _, p := range top.Pods {
			serve6(l, p.Name, p.IP6)
		}
		for _, n := range top.Nodes {
			serve6(l, n.Name, n.IP6)
		}
	})
	dumpOnFailure(&l)
	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && l != nil {
			GinkgoWriter.Print(dump6(l, "node-1", "node-2", "web-a", "web-b", "outside"))
		}
	})
	ip6 := func(member string) string {
		if p, ok := top.Pod("default/" + member); ok {
			return p.IP6.String()
		}
		if n, ok := top.Node(member); ok {
			return n.IP6.String()
		}
		for _, c := range top.Clients {
			if c.Name == member {
				return c.IP6.String()
			}
		}
		Fail("no member " + member)
		return ""
	}

	DescribeTable("connects members over IPv6 TCP by their own addresses",
		func(from, to string, source func() string) {
			saw, err := ask6(l, from, ip6(to))
			Expect(err).NotTo(HaveOccurred())
			Expect(saw).To(Equal(source()), "no address translation without a Service")
		},
		Entry("pod to pod across nodes (routed via the other node's IPv6 address)", "web-a", "web-b", func() string { return ip6("web-a") }),
		Entry("pod to pod on one node (bridged on cni0)", "client", "web-a", func() string { return ip6("client") }),
		Entry("node to a pod on another node (from its IPv6 node address)", "node-1", "web-b", func() string { return ip6("node-1") }),
		Entry("node to a local pod (from its cni0 IPv6 address)", "node-2", "web-b", func() string { return "fd00:10:244:2::1" }),
		Entry("pod to a node", "web-b", "node-1", func() string { return ip6("web-b") }),
		Entry("outside client to a node's IPv6 address", "outside", "node-2", func() string { return ip6("outside") }),
	)

	It("keeps IPv4 as it is beside IPv6", func() {
		r, err := ask(l, "web-a", "10.244.2.10:8080")
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Client.Addr().String()).To(Equal("10.244.1.10"))
	})

	It("answers no address the lab does not have, and routes no pod outside the cluster", func() {
		// Negative controls: fd00:1::99 is on the node network but nobody's, so
		// neighbour discovery finds no one; pods are not routed from outside.
		_, err := ask6(l, "outside", "fd00:1::99")
		Expect(err).To(HaveOccurred())
		Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeFalse(), "something answered for an address no member has: %v", err)
		_, err = ask6(l, "web-a", "fd00:10:244:2::99")
		Expect(err).To(HaveOccurred())
		Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeFalse(), "something answered for a pod address no pod has: %v", err)
		_, err = ask6(l, "outside", ip6("web-b"))
		Expect(errors.Is(err, syscall.ENETUNREACH)).To(BeTrue(), "pod addresses are not routed outside the cluster: %v", err)
	})

	It("leaves the root namespace's IPv6 settings as they were", func() {
		Expect(rootSysctls6()).To(Equal(root))
	})

	It("forwards IPv6 on nodes and gives every address at once, with no duplicate address detection", func() {
		for _, n := range top.Nodes {
			v, err := namespaces.ReadSysctl(netnsOf(l, n.Name), "net.ipv6.conf.all.forwarding")
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(Equal("1"), "node %s", n.Name)
		}
		for _, m := range []string{"node-1", "node-2", "web-a", "web-b", "client", "outside"} {
			for _, a := range addrs6(l, m) {
				Expect(a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED)).To(BeZero(), "%s: %s", m, a)
			}
		}
	})
})

// svclab's proxiers program IPv4 only, so a dual-stack lab's Services are
// IPv4 (an IPv6 one is refused when the file is read): they must work as in an
// IPv4 lab on nodes that also forward IPv6 and pass bridged IPv6 through
// ip6tables. The real kube-proxy's modes need the control plane, which a
// dual-stack lab does not have yet.
var _ = Describe("IPv4 Services in a dual-stack lab", func() {
	for _, m := range ownModes() {
		It("serve the ClusterIP to pods and the NodePort to the outside client, "+m.label, Label(m.label, "dualstack"), func() {
			top, err := topology.Load("testdata/dualstack.yaml")
			Expect(err).NotTo(HaveOccurred())
			l := upLab(top, m.options())
			for _, r := range backendsSeen(l, "client", "TCP", "10.96.123.45:80", "web-a", "web-b") {
				Expect(r.Client.Addr().String()).To(Equal("10.244.1.5"), "a pod's own address, not masqueraded")
			}
			backendsSeen(l, "outside", "TCP", "192.168.1.11:30080", "web-a", "web-b")
		})
	}
})

// rootSysctls6 are the root namespace's values of the IPv6 settings a
// dual-stack lab writes in its members, read on a thread locked in the root
// namespace (lab/namespaces switches only threads it locks itself).
func rootSysctls6() map[string]string {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	out := map[string]string{}
	for _, k := range []string{
		"net/ipv6/conf/all/forwarding", "net/ipv6/conf/all/accept_dad",
		"net/ipv6/conf/default/accept_dad", "net/ipv6/conf/all/disable_ipv6",
		"net/bridge/bridge-nf-call-ip6tables",
	} {
		b, err := os.ReadFile("/proc/sys/" + k)
		out[k] = strings.TrimSpace(string(b))
		if err != nil {
			out[k] = err.Error()
		}
	}
	return out
}

// serve6 answers TCP on [ip]:echo6Port inside member's namespace with the
// source address each connection came from, until the spec's container ends.
func serve6(l *lab.Lab, member string, ip netip.Addr) {
	var ln net.Listener
	ExpectWithOffset(1, namespaces.Do(netnsOf(l, member), func() (err error) {
		ln, err = net.Listen("tcp6", netip.AddrPortFrom(ip, echo6Port).String())
		return err
	})).To(Succeed(), "listen in %s on %s", member, ip)
	DeferCleanup(ln.Close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
			fmt.Fprintln(c, from)
			c.Close()
		}
	}()
}

// ask6 connects from member to [to]:echo6Port and returns the source address
// the server saw.
func ask6(l *lab.Lab, from, to string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var c net.Conn
	err := namespaces.Do(netnsOf(l, from), func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp6", netip.AddrPortFrom(netip.MustParseAddr(to), echo6Port).String())
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// addrs6 are the IPv6 addresses of every link of member.
func addrs6(l *lab.Lab, member string) []netlink.Addr {
	ns, err := namespaces.Open(netnsOf(l, member))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer ns.Close()
	addrs, err := ns.Netlink.AddrList(nil, netlink.FAMILY_V6)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return addrs
}

// dump6 is the IPv6 addresses, routes and neighbours of members, which the
// lab's own dump (IPv4) leaves out.
func dump6(l *lab.Lab, members ...string) string {
	var b strings.Builder
	for _, m := range members {
		fmt.Fprintf(&b, "\n===== %s: IPv6 =====\n", m)
		for _, argv := range [][]string{{"ip", "-6", "addr"}, {"ip", "-6", "route"}, {"ip", "-6", "neigh"}} {
			namespaces.Do(netnsOf(l, m), func() error {
				out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
				fmt.Fprintf(&b, "$ %s\n%s", strings.Join(argv, " "), out)
				if err != nil {
					fmt.Fprintf(&b, "(%v)\n", err)
				}
				return nil
			})
		}
	}
	return b.String()
}
