package specs

import (
	"net"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// ctLab: two backends for a TCP and a UDP Service, both on node-2, and a client pod
// on node-1, so every flow is translated on node-1 and crosses to node-2.
const ctLab = `
name: ct
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/24}
pods:
  - name: web-1
    node: node-2
    ip: 10.244.2.10
    labels: {app: web}
    ports: [{containerPort: 8080}, {containerPort: 5353, protocol: UDP}]
  - name: web-2
    node: node-2
    ip: 10.244.2.11
    labels: {app: web}
    ports: [{containerPort: 8080}, {containerPort: 5353, protocol: UDP}]
  - {name: client, node: node-1, ip: 10.244.1.5}
services:
  - apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec:
      clusterIP: 10.96.0.10
      selector: {app: web}
      ports:
        - {name: http, port: 80, targetPort: 8080}
        - {name: dns, port: 53, targetPort: 5353, protocol: UDP}
`

// conntrackEntries reads a lab member's conntrack table over netlink.
func conntrackEntries(l *lab.Lab, member string) []*netlink.ConntrackFlow {
	ns, err := namespaces.Open(netnsOf(l, member))
	Expect(err).NotTo(HaveOccurred())
	defer ns.Close()
	nl := ns.Netlink
	flows, err := nl.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	Expect(err).NotTo(HaveOccurred())
	return flows
}

// entryFor finds the conntrack entry of the flow leaving from src.
func entryFor(flows []*netlink.ConntrackFlow, proto uint8, src netip.AddrPort) *netlink.ConntrackFlow {
	for _, f := range flows {
		if f.Forward.Protocol == proto && f.Forward.SrcPort == src.Port() && f.Forward.SrcIP.Equal(net.IP(src.Addr().AsSlice())) {
			return f
		}
	}
	return nil
}

// established opens a long-lived TCP connection from the client pod to the web
// Service and returns it with its first reply. It is closed when the spec ends.
func established(l *lab.Lab) (*traffic.Conn, traffic.Reply) {
	c, err := traffic.Open(dial(l, "client", "TCP", "10.96.0.10:80", 2*time.Second))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	r, err := c.Ask()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return c, r
}

// notReady takes a pod out of its Services the way a failing readiness probe does:
// the pod and its connections stay up.
func notReady(l *lab.Lab, pod string) {
	ExpectWithOffset(1, l.UpdatePod(ctx(), "default/"+pod, func(p *topology.Pod) { p.Ready = false })).To(Succeed())
}

var _ = Describe("Conntrack", func() {
	for _, m := range modes {
		Context(m.label, Label(m.label, "conntrack"), func() {
			var l *lab.Lab
			BeforeEach(func() {
				l = upLab(parse("ct.yaml", ctLab), m.options())
			})
			dumpOnFailure(&l)

			It("answers from the ClusterIP (reverse NAT), with the entry on the client's node showing both sides", func() {
				c, r := established(l)
				// The socket is connected to the ClusterIP: the kernel accepted the
				// SYN-ACK only because conntrack rewrote its source back to it.
				Expect(c.Remote()).To(Equal(netip.MustParseAddrPort("10.96.0.10:80")))
				e := entryFor(conntrackEntries(l, "node-1"), unix.IPPROTO_TCP, c.Local())
				Expect(e).NotTo(BeNil(), "an entry for %s on node-1", c.Local())
				Expect(e.Forward.DstIP.String()).To(Equal("10.96.0.10"))
				Expect(e.Forward.DstPort).To(BeEquivalentTo(80))
				Expect(e.Reverse.SrcIP.String()).To(Equal(r.Addr.Addr().String()))
				Expect(e.Reverse.SrcPort).To(BeEquivalentTo(8080))
				Expect(e.Reverse.DstIP.String()).To(Equal("10.244.1.5"), "a pod's flow is not masqueraded")
			})

			It("keeps an established TCP connection on its endpoint after the endpoint leaves the Service, while new connections avoid it", func() {
				c, r := established(l)
				old := r.Pod
				notReady(l, old)
				for i := 0; i < 5; i++ {
					r, err := c.Ask()
					Expect(err).NotTo(HaveOccurred())
					Expect(r.Pod).To(Equal(old), "the conntrack entry still maps the flow to %s", old)
				}
				for i := 0; i < 20; i++ {
					r, err := ask(l, "client", "10.96.0.10:80")
					Expect(err).NotTo(HaveOccurred())
					Expect(r.Pod).NotTo(Equal(old))
				}
			})

			It("times out an established connection once its backend pod is deleted: nothing answers, no reset", func() {
				c, r := established(l)
				Expect(l.DeletePod(ctx(), "default/"+r.Pod, false)).To(Succeed())
				// The entry still sends the flow to the old pod address, where no
				// interface is left to answer or to reset.
				_, err := c.Ask()
				Expect(traffic.Classify(err)).To(Equal(traffic.Timeout), "%v", err)
			})

			It("tells a graceful pod deletion apart: the server closes, the client reads end of stream", func() {
				c, r := established(l)
				Expect(l.DeletePod(ctx(), "default/"+r.Pod, true)).To(Succeed())
				_, err := c.Ask()
				Expect(traffic.Classify(err)).To(Equal(traffic.Reset), "%v", err)
			})

			It("moves a UDP flow off a removed endpoint at once: kube-proxy deletes its conntrack entries", func() {
				d := dial(l, "client", "UDP", "10.96.0.10:53", time.Second)
				d.SrcPort = 41000
				r, err := traffic.Request(d)
				Expect(err).NotTo(HaveOccurred())
				old, oldIP := r.Pod, r.Addr.Addr()
				notReady(l, old)
				// The lab takes a node as programmed once its rules are in; the
				// real kube-proxy deletes the stale entries after writing them, in
				// the same sync (svclab's proxiers before the sync returns), so a
				// datagram sent in between would keep the old entry alive. Seen on
				// a loaded machine: the next datagram still went to the old pod.
				// The entry's own timeout (nf_conntrack_udp_timeout, 30 s) is three
				// times this bound: an entry gone within it was deleted, not expired.
				Eventually(func(g Gomega) {
					for _, f := range conntrackEntries(l, "node-1") {
						g.Expect(f.Forward.Protocol == unix.IPPROTO_UDP && f.Reverse.SrcIP.Equal(net.IP(oldIP.AsSlice()))).
							To(BeFalse(), "a conntrack entry with replies from %s is left: %s", old, f)
					}
				}).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
				r, err = traffic.Request(d)
				Expect(err).NotTo(HaveOccurred())
				Expect(r.Pod).NotTo(Equal(old))
			})
		})

		if !m.own() {
			// kube-proxy always cleans up; the switch is svclab's.
			continue
		}
		Context(m.label+" without conntrack cleanup", Label(m.label, "conntrack"), func() {
			var l *lab.Lab
			BeforeEach(func() {
				o := m.options()
				o.Proxy.NoConntrackCleanup = true
				l = upLab(parse("ct.yaml", ctLab), o)
			})
			dumpOnFailure(&l)

			if m.model() == proxy.ModelIPVS {
				// IPVS differs: kube-proxy deletes a UDP real server at once (UDP has
				// no graceful termination), and with net.ipv4.vs.expire_nodest_conn=1
				// the kernel (5.9 and later) expires the IPVS connections that went
				// to it, deleting their conntrack entries as it does for every
				// connection it expires (net.ipv4.vs.conntrack=1). The next datagram
				// is scheduled anew.
				It("moves a UDP flow off a removed endpoint even without conntrack cleanup: IPVS expires its connections and their conntrack entries itself", func() {
					d := dial(l, "client", "UDP", "10.96.0.10:53", time.Second)
					d.SrcPort = 41000
					r, err := traffic.Request(d)
					Expect(err).NotTo(HaveOccurred())
					old, oldIP := r.Pod, r.Addr.Addr()
					Expect(entryFor(conntrackEntries(l, "node-1"), unix.IPPROTO_UDP, netip.AddrPortFrom(netip.MustParseAddr("10.244.1.5"), 41000))).NotTo(BeNil())
					notReady(l, old)
					// The kernel expires them from a work queue, just after the sync.
					Eventually(func(g Gomega) {
						for _, f := range conntrackEntries(l, "node-1") {
							g.Expect(f.Forward.Protocol == unix.IPPROTO_UDP && f.Reverse.SrcIP.Equal(net.IP(oldIP.AsSlice()))).
								To(BeFalse(), "a conntrack entry with replies from %s is left: %s", old, f)
						}
					}).WithTimeout(5 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
					for i := 0; i < 5; i++ {
						r, err := traffic.Request(d)
						Expect(err).NotTo(HaveOccurred())
						Expect(r.Pod).NotTo(Equal(old), "IPVS schedules the flow anew")
					}
				})
				return
			}
			It("keeps sending a UDP flow to a removed endpoint until its conntrack entries are deleted", func() {
				d := dial(l, "client", "UDP", "10.96.0.10:53", time.Second)
				d.SrcPort = 41000
				r, err := traffic.Request(d)
				Expect(err).NotTo(HaveOccurred())
				old, oldIP := r.Pod, r.Addr.Addr()
				notReady(l, old)
				for i := 0; i < 5; i++ {
					r, err := traffic.Request(d)
					Expect(err).NotTo(HaveOccurred())
					Expect(r.Pod).To(Equal(old), "the stale entry keeps the flow on %s (kubernetes#48370)", old)
				}
				deleted := deleteConntrack(l, "node-1", unix.IPPROTO_UDP, oldIP)
				Expect(deleted).To(BeNumerically(">", 0))
				r, err = traffic.Request(d)
				Expect(err).NotTo(HaveOccurred())
				Expect(r.Pod).NotTo(Equal(old))
			})
		})
	}
})

// deleteConntrack deletes a member's conntrack entries whose replies come from ip,
// as kube-proxy does for a removed UDP endpoint, and returns how many went.
func deleteConntrack(l *lab.Lab, member string, proto uint8, ip netip.Addr) uint {
	ns, err := namespaces.Open(netnsOf(l, member))
	Expect(err).NotTo(HaveOccurred())
	defer ns.Close()
	nl := ns.Netlink
	f := &netlink.ConntrackFilter{}
	Expect(f.AddProtocol(proto)).To(Succeed())
	Expect(f.AddIP(netlink.ConntrackReplySrcIP, net.IP(ip.AsSlice()))).To(Succeed())
	n, err := nl.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, f)
	Expect(err).NotTo(HaveOccurred())
	return n
}
