package specs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// hostServerPort is where the spec serves in each node, with the server the
// lab gives a node's host-network endpoint: the lab serves the pods' declared
// ports (8080) in both families itself, and nothing in a bare lab's nodes.
const hostServerPort = 9090

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
		// The pods with ports are the lab's own servers, on both families;
		// the nodes get the same server, TCP and UDP, as for a
		// host-network endpoint.
		for _, n := range top.Nodes {
			srv, err := traffic.Serve(netnsOf(l, n.Name), traffic.Identity{Node: n.Name, IP: n.IP, IP6: n.IP6}, []corev1.ContainerPort{
				{ContainerPort: hostServerPort, Protocol: corev1.ProtocolTCP},
				{ContainerPort: hostServerPort, Protocol: corev1.ProtocolUDP},
			})
			Expect(err).NotTo(HaveOccurred(), "serve in node %s", n.Name)
			DeferCleanup(srv.Close)
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
	// at6 is where member's server answers over IPv6: a pod's declared
	// port, a node's hostServerPort.
	at6 := func(member string) string {
		if p, ok := top.Pod("default/" + member); ok {
			Expect(p.Ports).NotTo(BeEmpty(), "pod %s serves nothing", member)
			return net.JoinHostPort(ip6(member), strconv.Itoa(int(p.Ports[0].ContainerPort)))
		}
		return net.JoinHostPort(ip6(member), strconv.Itoa(hostServerPort))
	}
	// answers checks that member's server answered r over IPv6, naming
	// itself and its IPv6 address in net.JoinHostPort's form.
	answers := func(r traffic.Reply, member, proto string) {
		GinkgoHelper()
		if _, ok := top.Pod("default/" + member); ok {
			Expect(r.Pod).To(Equal(member))
		} else {
			Expect(r.Pod).To(BeEmpty())
			Expect(r.Node).To(Equal(member))
		}
		Expect(r.Addr.String()).To(Equal(at6(member)))
		Expect(r.Protocol).To(Equal(proto))
	}

	DescribeTable("connects members over IPv6 TCP by their own addresses",
		func(from, to string, source func() string) {
			r, err := ask6(l, from, "TCP", at6(to))
			Expect(err).NotTo(HaveOccurred())
			answers(r, to, "TCP")
			Expect(r.Client.Addr().String()).To(Equal(source()), "no address translation without a Service")
		},
		Entry("pod to pod across nodes (routed via the other node's IPv6 address)", "web-a", "web-b", func() string { return ip6("web-a") }),
		Entry("pod to pod on one node (bridged on cni0)", "client", "web-a", func() string { return ip6("client") }),
		Entry("node to a pod on another node (from its IPv6 node address)", "node-1", "web-b", func() string { return ip6("node-1") }),
		Entry("node to a local pod (from its cni0 IPv6 address)", "node-2", "web-b", func() string { return "fd00:10:244:2::1" }),
		Entry("pod to a node", "web-b", "node-1", func() string { return ip6("web-b") }),
		Entry("outside client to a node's IPv6 address", "outside", "node-2", func() string { return ip6("outside") }),
	)

	DescribeTable("answers IPv6 UDP with the source address it saw",
		func(from, to string, source func() string) {
			r, err := ask6(l, from, "UDP", at6(to))
			Expect(err).NotTo(HaveOccurred())
			answers(r, to, "UDP")
			Expect(r.Client.Addr().String()).To(Equal(source()), "no address translation without a Service")
		},
		Entry("pod to a node on another node", "web-a", "node-2", func() string { return ip6("web-a") }),
		Entry("outside client to a node's IPv6 address", "outside", "node-1", func() string { return ip6("outside") }),
	)

	It("keeps IPv4 as it is beside IPv6", func() {
		r, err := ask(l, "web-a", "10.244.2.10:8080")
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Client.Addr().String()).To(Equal("10.244.1.10"))
		// The same server answers both families, each reply in its own.
		Expect(r.Pod).To(Equal("web-b"))
		Expect(r.Addr.String()).To(Equal("10.244.2.10:8080"))
		r6, err := ask6(l, "web-a", "TCP", at6("web-b"))
		Expect(err).NotTo(HaveOccurred())
		Expect(r6.Pod).To(Equal("web-b"))
		Expect(r6.Addr.String()).To(Equal("[fd00:10:244:2::10]:8080"))
		Expect(r6.Client.Addr().String()).To(Equal(ip6("web-a")))
	})

	It("answers no address the lab does not have, and routes no pod outside the cluster", func() {
		// Negative controls: fd00:1::99 is on the node network but nobody's, so
		// neighbour discovery finds no one; pods are not routed from outside.
		_, err := ask6(l, "outside", "TCP", net.JoinHostPort("fd00:1::99", strconv.Itoa(hostServerPort)))
		Expect(err).To(HaveOccurred())
		Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeFalse(), "something answered for an address no member has: %v", err)
		_, err = ask6(l, "web-a", "TCP", "[fd00:10:244:2::99]:8080")
		Expect(err).To(HaveOccurred())
		Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeFalse(), "something answered for a pod address no pod has: %v", err)
		_, err = ask6(l, "outside", "TCP", at6("web-b"))
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

// ask6 makes one short exchange from member to, an IPv6 address and port,
// with lab/traffic's client.
func ask6(l *lab.Lab, from, proto, to string) (traffic.Reply, error) {
	return traffic.Request(dial(l, from, proto, to, 2*time.Second))
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
