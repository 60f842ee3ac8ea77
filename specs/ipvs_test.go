package specs

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/moby/ipvs"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/trace"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/verify"
)

// ipvsLab: three backends of app b (two on node-1), two of app g, client pods on
// both nodes. Service b is a NodePort with a TCP and a UDP port, sticky has ClientIP
// affinity with a 12 s timeout, g is for graceful termination, local is a NodePort
// with externalTrafficPolicy Local.
const ipvsLab = `
name: ipvs
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/24}
pods:
  - {name: b-1, node: node-1, ip: 10.244.1.11, labels: {app: b}, ports: [{containerPort: 8080}, {containerPort: 5353, protocol: UDP}]}
  - {name: b-2, node: node-2, ip: 10.244.2.12, labels: {app: b}, ports: [{containerPort: 8080}, {containerPort: 5353, protocol: UDP}]}
  - {name: b-3, node: node-1, ip: 10.244.1.13, labels: {app: b}, ports: [{containerPort: 8080}, {containerPort: 5353, protocol: UDP}]}
  - {name: g-1, node: node-1, ip: 10.244.1.21, labels: {app: g}, ports: [{containerPort: 8080}]}
  - {name: g-2, node: node-2, ip: 10.244.2.22, labels: {app: g}, ports: [{containerPort: 8080}]}
  - {name: c-1, node: node-1, ip: 10.244.1.101}
  - {name: c-2, node: node-1, ip: 10.244.1.102}
  - {name: c-3, node: node-1, ip: 10.244.1.103}
  - {name: c-4, node: node-1, ip: 10.244.1.104}
  - {name: c-5, node: node-1, ip: 10.244.1.105}
  - {name: c-6, node: node-1, ip: 10.244.1.106}
  - {name: c-7, node: node-2, ip: 10.244.2.107}
  - {name: c-8, node: node-2, ip: 10.244.2.108}
services:
  - apiVersion: v1
    kind: Service
    metadata: {name: b}
    spec:
      type: NodePort
      clusterIP: 10.96.0.10
      selector: {app: b}
      ports:
        - {name: http, port: 80, targetPort: 8080, nodePort: 30080}
        - {name: dns, port: 53, targetPort: 5353, protocol: UDP, nodePort: 30053}
  - apiVersion: v1
    kind: Service
    metadata: {name: sticky}
    spec:
      clusterIP: 10.96.0.20
      selector: {app: b}
      sessionAffinity: ClientIP
      sessionAffinityConfig: {clientIP: {timeoutSeconds: 12}}
      ports: [{port: 80, targetPort: 8080}]
  - apiVersion: v1
    kind: Service
    metadata: {name: g}
    spec:
      clusterIP: 10.96.0.30
      selector: {app: g}
      ports: [{port: 80, targetPort: 8080}]
  - apiVersion: v1
    kind: Service
    metadata: {name: local}
    spec:
      type: NodePort
      externalTrafficPolicy: Local
      clusterIP: 10.96.0.40
      selector: {app: b}
      ports: [{port: 80, targetPort: 8080, nodePort: 30040}]
`

// ipvsSelected tells whether SVCLAB_MODES runs svclab's IPVS mode (its rendered layout,
// and schedulers set through its configuration); these IPVS-only specs are in
// the tree only then.
func ipvsSelected() (modeCase, bool) {
	for _, m := range ownModes() {
		if m.model() == proxy.ModelIPVS {
			return m, true
		}
	}
	return modeCase{}, false
}

// ipvsAt is an IPVS netlink handle inside a lab member's namespace.
func ipvsAt(l *lab.Lab, member string) *ipvs.Handle {
	h, err := ipvs.New(namespaces.Path(netnsOf(l, member)))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(h.Close)
	return h
}

// virtualServer finds the TCP virtual server vip:port.
func virtualServer(h *ipvs.Handle, vip string, port uint16) *ipvs.Service {
	svcs, err := h.GetServices()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, s := range svcs {
		if s.Address.String() == vip && s.Port == port && s.Protocol == 6 {
			return s
		}
	}
	Fail(fmt.Sprintf("no virtual server TCP %s:%d", vip, port), 1)
	return nil
}

// realServer reads the real server addr of the TCP virtual server vip:port on a
// node, nil when there is none.
func realServer(l *lab.Lab, node, vip string, port uint16, addr netip.AddrPort) *ipvs.Destination {
	h := ipvsAt(l, node)
	dests, err := h.GetDestinations(virtualServer(h, vip, port))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, d := range dests {
		if d.Address.String() == addr.Addr().String() && d.Port == addr.Port() {
			return d
		}
	}
	return nil
}

// sequence makes n new connections one after the other and lists who answered.
func sequence(l *lab.Lab, from, to string, n int) []string {
	out := make([]string, n)
	for i := range out {
		r, err := ask(l, from, to)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		out[i] = r.Pod
	}
	return out
}

func distinct(pods []string) int {
	seen := map[string]bool{}
	for _, p := range pods {
		seen[p] = true
	}
	return len(seen)
}

// holdOpen opens a TCP connection from a lab member that the spec keeps open; it
// is reset (traffic.Conn.Abort), not closed, when the spec ends: IPVS keeps a reset
// connection in its table for 10 s (its CLOSE state), a cleanly closed one for up
// to two minutes (FIN_WAIT, TIME_WAIT).
func holdOpen(l *lab.Lab, from, to string) *traffic.Conn {
	c, err := traffic.Open(dial(l, from, "TCP", to, 2*time.Second))
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "TCP from %s to %s", from, to)
	DeferCleanup(func() { c.Abort() })
	return c
}

// askHeld is one exchange on a held connection.
func askHeld(c *traffic.Conn) traffic.Reply {
	r, err := c.Ask()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return r
}

// resetAsk is one exchange on a new connection ended with a reset.
func resetAsk(l *lab.Lab, from, to string) string {
	c := holdOpen(l, from, to)
	defer c.Abort()
	return askHeld(c).Pod
}

// hasTemplate tells whether node's IPVS holds a persistence template for client:
// an entry from client port 0 in `ipvsadm -Lnc` (state NONE, or ASSURED once it
// placed more than one connection).
func hasTemplate(l *lab.Lab, node string, client netip.Addr, vip string) bool {
	out, err := namespaces.Output(netnsOf(l, node), "ipvsadm", "-Lnc")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[3] == client.String()+":0" && strings.HasPrefix(f[4], vip+":") {
			return true
		}
	}
	return false
}

// section is the part of text after the line header, up to the next "# " line.
func section(text, header string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case l == header:
			in = true
		case in && strings.HasPrefix(l, "# "):
			return out
		case in && l != "":
			out = append(out, l)
		}
	}
	return out
}

func trimLines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			out = append(out, l)
		}
	}
	return out
}

var _ = Describe("IPVS mode", Label("ipvs"), func() {
	m, ok := ipvsSelected()
	if !ok {
		return
	}
	options := func(scheduler, backend string) lab.Options {
		o := m.options()
		o.Proxy.KubeProxy.IPVS.Scheduler, o.Proxy.Backend = scheduler, backend
		return o
	}

	for _, v := range xtables.Variants() {
		backend := v.Backend
		Context("kube-proxy's layout, iptables "+backend, Ordered, func() {
			var l *lab.Lab
			var rendered string
			BeforeAll(func() {
				l = upLab(parse("ipvs.yaml", ipvsLab), options("", backend))
				tgt, err := l.Proxies().Target("node-1")
				Expect(err).NotTo(HaveOccurred())
				rendered, err = m.mode.Render(tgt, proxy.StateOf(l.Proxies().ServicePorts()))
				Expect(err).NotTo(HaveOccurred())
			})
			dumpOnFailure(&l)

			It("holds the virtual servers `svclab rules` renders, as `ipvsadm -Ln` lists them: ClusterIPs and both node addresses (eth0, cni0) per NodePort", func() {
				out, err := namespaces.Output(netnsOf(l, "node-1"), "ipvsadm", "-Ln", "--sort")
				Expect(err).NotTo(HaveOccurred())
				Expect(trimLines(out)).To(Equal(section(rendered, "# ipvsadm -Ln --sort")))
				Expect(string(out)).To(ContainSubstring("TCP  10.96.0.20:80 rr persistent 12"))
				Expect(string(out)).To(ContainSubstring("UDP  192.168.1.10:30053 rr"))
				Expect(string(out)).To(ContainSubstring("TCP  10.244.1.1:30080 rr"))
			})

			It("binds every ClusterIP to kube-ipvs0, a dummy link left down", func() {
				ns, err := namespaces.Open(netnsOf(l, "node-1"))
				Expect(err).NotTo(HaveOccurred())
				defer ns.Close()
				nl := ns.Netlink
				link, err := nl.LinkByName("kube-ipvs0")
				Expect(err).NotTo(HaveOccurred())
				Expect(link.Type()).To(Equal("dummy"))
				Expect(link.Attrs().Flags & net.FlagUp).To(BeZero())
				addrs, err := nl.AddrList(link, netlink.FAMILY_V4)
				Expect(err).NotTo(HaveOccurred())
				var got []string
				for _, a := range addrs {
					got = append(got, a.IPNet.String())
				}
				Expect(got).To(ConsistOf("10.96.0.10/32", "10.96.0.20/32", "10.96.0.30/32", "10.96.0.40/32"))
			})

			It("fills kube-proxy's ipsets as rendered", func() {
				out, err := namespaces.Output(netnsOf(l, "node-1"), "ipset", "save")
				Expect(err).NotTo(HaveOccurred())
				want := section(rendered, "# ipset save")
				var wantAdds, gotAdds, gotCreates []string
				for _, w := range want {
					if strings.HasPrefix(w, "add ") {
						wantAdds = append(wantAdds, w)
					}
				}
				for _, g := range trimLines(out) {
					if strings.HasPrefix(g, "add ") {
						gotAdds = append(gotAdds, g)
					} else {
						gotCreates = append(gotCreates, g)
					}
				}
				Expect(gotAdds).To(ConsistOf(wantAdds))
				Expect(wantAdds).To(ContainElements(
					"add KUBE-CLUSTER-IP 10.96.0.10,udp:53",
					"add KUBE-NODE-PORT-TCP 30040", "add KUBE-NODE-PORT-LOCAL-TCP 30040",
					"add KUBE-NODE-PORT-UDP 30053",
					"add KUBE-LOOP-BACK 10.244.1.13,tcp:8080,10.244.1.13"))
				for _, w := range want {
					if strings.HasPrefix(w, "create ") {
						// ipset 7 adds bucketsize and a random initval to hash sets.
						Expect(gotCreates).To(ContainElement(HavePrefix(w)))
					}
				}
			})

			It("writes kube-proxy's iptables chains, with as many rules as rendered, and the jumps to them", func() {
				count := func(lines []string) map[string]int {
					n := map[string]int{}
					table := ""
					for _, l := range lines {
						if strings.HasPrefix(l, "*") {
							table = l[1:]
						}
						if f := strings.Fields(l); len(f) > 1 && f[0] == "-A" {
							n[table+"/"+f[1]]++
						}
					}
					return n
				}
				want := count(section(rendered, "# iptables-restore -w 5 --noflush --counters of:"))
				Expect(want).NotTo(BeEmpty(), "the rendered rules have an iptables-restore section")
				var saved []string
				for _, table := range []string{"nat", "filter"} {
					out, err := namespaces.Output(netnsOf(l, "node-1"), "iptables-"+backend+"-save", "-t", table)
					Expect(err).NotTo(HaveOccurred())
					saved = append(saved, trimLines(out)...)
				}
				got := count(saved)
				for chain, n := range want {
					Expect(got).To(HaveKeyWithValue(chain, n), chain)
				}
				for _, jump := range []string{"nat/PREROUTING", "nat/OUTPUT", "nat/POSTROUTING", "filter/INPUT", "filter/FORWARD", "filter/OUTPUT"} {
					Expect(got).To(HaveKey(jump))
				}
			})

			It("sets kube-proxy's IPVS sysctls in the node (conn_reuse_mode stays as the kernel has it since 5.9)", func() {
				for key, want := range map[string]string{
					"net.ipv4.vs.conntrack":                 "1",
					"net.ipv4.vs.expire_nodest_conn":        "1",
					"net.ipv4.vs.expire_quiescent_template": "1",
					"net.ipv4.vs.conn_reuse_mode":           "1",
					"net.ipv4.ip_forward":                   "1",
				} {
					v, err := namespaces.ReadSysctl(netnsOf(l, "node-1"), key)
					Expect(err).NotTo(HaveOccurred())
					Expect(v).To(Equal(want), key)
				}
			})
		})
	}

	Context("scheduler rr (kube-proxy's default)", Ordered, func() {
		var l *lab.Lab
		BeforeAll(func() {
			l = upLab(parse("ipvs.yaml", ipvsLab), options("", ""))
		})
		dumpOnFailure(&l)

		It("cycles through the backends in a fixed order: any 3 consecutive connections reach the 3 backends (an exact rotation, not a random choice)", func() {
			seq := sequence(l, "c-1", "10.96.0.10:80", 12)
			Expect(distinct(seq[:3])).To(Equal(3), "%v", seq)
			for i := 3; i < len(seq); i++ {
				Expect(seq[i]).To(Equal(seq[i-3]), "%v", seq)
			}
		})

		It("negative control for sh: one client's connections reach several backends", func() {
			Expect(distinct(sequence(l, "c-1", "10.96.0.10:80", 6))).To(BeNumerically(">", 1))
		})

		// A template's timer restarts with every connection it places, and the
		// template goes when the timer fires with none of them left in IPVS's
		// table. If some are left, the kernel gives the template 60 s more
		// (ip_vs_conn_expire): a client whose closed connections linger in
		// TIME_WAIT (two minutes) keeps its backend well past timeoutSeconds
		// (kubernetes#89358; the distribution spec shows it). Connections ended with
		// a reset stay 10 s (IPVS's CLOSE state), less than this Service's 12 s.
		It("persistence: a template keeps the client on one backend and expires timeoutSeconds after its last connection, once its connections left IPVS's table", func() {
			client := netip.MustParseAddr("10.244.1.102")
			first := resetAsk(l, "c-2", "10.96.0.20:80")
			for i := 0; i < 3; i++ {
				Expect(resetAsk(l, "c-2", "10.96.0.20:80")).To(Equal(first))
			}
			Expect(hasTemplate(l, "node-1", client, "10.96.0.20")).To(BeTrue())
			Eventually(func() bool { return hasTemplate(l, "node-1", client, "10.96.0.20") }).
				WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(BeFalse())
			Expect(resetAsk(l, "c-2", "10.96.0.20:80")).NotTo(Equal(first),
				"scheduled anew, and rr's next pick on this otherwise idle virtual server is another backend")
		})

		It("graceful termination: a removed endpoint holding a connection stays at weight 0, still serving it, and is deleted once the connection left IPVS's table", func() {
			c := holdOpen(l, "c-3", "10.96.0.30:80")
			r := askHeld(c)
			Expect(l.UpdatePod(ctx(), "default/"+r.Pod, func(p *topology.Pod) { p.Ready = false })).To(Succeed())
			rs := realServer(l, "node-1", "10.96.0.30", 80, r.Addr)
			Expect(rs).NotTo(BeNil(), "kept while its connection is open")
			Expect(rs.Weight).To(Equal(0))
			Expect(rs.ActiveConnections).To(Equal(1))
			Expect(askHeld(c).Pod).To(Equal(r.Pod), "IPVS still forwards the open connection")
			for _, p := range sequence(l, "c-3", "10.96.0.30:80", 4) {
				Expect(p).NotTo(Equal(r.Pod), "weight 0: no new connection")
			}
			Consistently(func() *ipvs.Destination { return realServer(l, "node-1", "10.96.0.30", 80, r.Addr) }).
				WithTimeout(3*time.Second).WithPolling(500*time.Millisecond).ShouldNot(BeNil(), "not deleted while the connection is open")
			c.Abort()
			Eventually(func() *ipvs.Destination { return realServer(l, "node-1", "10.96.0.30", 80, r.Addr) }).
				WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(BeNil(), "deleted once the reset connection expired (10 s)")
		})

		// IPVS matches a real server's reply to its connection table by the client's
		// address and port and the real server's only, and keeps a UDP connection
		// 300 s: a later flow from the same client address and port to the same
		// endpoint that does not go through the virtual server has its replies
		// rewritten to come from the virtual server, and its client never sees one.
		// verify meets this when a masquerade picks such a port, and makes the
		// attempt again on exactly this evidence (lab/verify/hijack.go).
		It("gives the replies of a later flow to an older connection from the same client address and port to the same real server, and svclab trace names that connection", func() {
			const from, nodePort = "c-7", "192.168.1.10:30053"
			// A port that is no connection's yet in node-1's table; rr sends a
			// third of the NodePort's connections to b-2 on node-2, whose replies
			// do not pass node-1: the first port whose connection node-1 ends on
			// one of its own endpoints is the one.
			var port uint16
			var backend netip.AddrPort
			for p := uint16(41001); p < 41010 && port == 0; p++ {
				d := dial(l, from, "UDP", nodePort, 2*time.Second)
				d.SrcPort = int(p)
				r, err := traffic.Request(d)
				Expect(err).NotTo(HaveOccurred())
				if r.Node == "node-1" {
					port, backend = p, r.Addr
				}
			}
			Expect(port).NotTo(BeZero(), "rr sent 9 connections in a row to node-2")
			out, err := namespaces.Output(netnsOf(l, "node-1"), "ipvsadm", "-Lnc")
			Expect(err).NotTo(HaveOccurred())
			Expect(string(out)).To(MatchRegexp(`UDP +\S+ +UDP +10\.244\.2\.107:%d +%s +%s\n`, port, regexp.QuoteMeta(nodePort), regexp.QuoteMeta(backend.String())))

			direct := dial(l, from, "UDP", backend.String(), time.Second)
			direct.SrcPort = int(port)
			_, err = traffic.Request(direct)
			Expect(traffic.Classify(err)).To(Equal(traffic.Timeout), "the endpoint's reply is node-1's NodePort's now")
			flow := verify.Flow{Protocol: "UDP", Target: verify.Target{Addr: backend}, Expected: verify.Expectation{Backends: map[string][]netip.Addr{backend.String(): nil}}}
			taken, err := verify.ReplyTaken(l, flow)
			Expect(err).NotTo(HaveOccurred())
			Expect(taken).To(ContainSubstring(fmt.Sprintf("taken by node-1's older IPVS connection 10.244.2.107:%d -> %s -> %s", port, nodePort, backend)))

			By("svclab trace from that port names the connection that took the reply")
			req := trace.Request{From: from, To: backend, Protocol: "UDP", SrcPort: port, Timeout: time.Second}
			t, err := trace.Run(ctx(), trace.FromRecord(l.Record()), req)
			Expect(err).NotTo(HaveOccurred())
			Expect(t.End.Outcome).To(Equal(trace.Dropped), "%s", t.End)
			Expect(t.End.Member).To(Equal("node-1"))
			Expect(t.End.By).To(ContainSubstring(fmt.Sprintf("given to an older IPVS connection, 10.244.2.107:%d -> %s -> %s", port, nodePort, backend)))

			By("negative control: from a port no connection holds, the same datagram is answered, and traced so")
			direct.SrcPort = int(port) + 100
			r, err := traffic.Request(direct)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Addr).To(Equal(backend))
			req.SrcPort = port + 101
			t, err = trace.Run(ctx(), trace.FromRecord(l.Record()), req)
			Expect(err).NotTo(HaveOccurred())
			Expect(t.End.Outcome).To(Equal(trace.Answered), "%s", t.End)
		})
	})

	Context("scheduler sh", Ordered, func() {
		var l *lab.Lab
		BeforeAll(func() {
			l = upLab(parse("ipvs.yaml", ipvsLab), options("sh", ""))
		})
		dumpOnFailure(&l)

		It("sends each client to one backend (a hash of its address), and different clients to different backends", func() {
			chosen := map[string]string{}
			var all []string
			for i := 1; i <= 8; i++ {
				client := fmt.Sprintf("c-%d", i)
				seq := sequence(l, client, "10.96.0.10:80", 5)
				Expect(distinct(seq)).To(Equal(1), "%s: %v", client, seq)
				chosen[client] = seq[0]
				all = append(all, seq[0])
			}
			Expect(distinct(all)).To(BeNumerically(">", 1), "%v", chosen)
		})
	})

	Context("scheduler wrr", Ordered, func() {
		var l *lab.Lab
		BeforeAll(func() {
			l = upLab(parse("ipvs.yaml", ipvsLab), options("wrr", ""))
		})
		dumpOnFailure(&l)

		It("splits evenly while kube-proxy's weights are all 1", func() {
			Expect(distribution(l, "c-1", "10.96.0.10:80", 30)).To(Equal(map[string]int{"b-1": 10, "b-2": 10, "b-3": 10}))
		})

		It("follows weights: set to 3:2:1 over netlink (kube-proxy only ever sets 1; it leaves them until it restarts), 60 connections split 30:20:10", func() {
			h := ipvsAt(l, "node-1")
			svc := virtualServer(h, "10.96.0.10", 80)
			dests, err := h.GetDestinations(svc)
			Expect(err).NotTo(HaveOccurred())
			weights := map[string]int{"10.244.1.11": 3, "10.244.2.12": 2, "10.244.1.13": 1}
			for _, d := range dests {
				d.Weight = weights[d.Address.String()]
				Expect(h.UpdateDestination(svc, d)).To(Succeed())
			}
			Expect(distribution(l, "c-1", "10.96.0.10:80", 60)).To(Equal(map[string]int{"b-1": 30, "b-2": 20, "b-3": 10}))
		})
	})

	Context("scheduler lc", Ordered, func() {
		var l *lab.Lab
		BeforeAll(func() {
			l = upLab(parse("ipvs.yaml", ipvsLab), options("lc", ""))
		})
		dumpOnFailure(&l)

		It("sends a new connection to the backend with the fewest: held-open connections spread one per backend, and a backend whose connection closed is chosen next", func() {
			var held []*traffic.Conn
			var pods []string
			for i := 0; i < 3; i++ {
				c := holdOpen(l, "c-1", "10.96.0.10:80")
				held = append(held, c)
				pods = append(pods, askHeld(c).Pod)
			}
			Expect(distinct(pods)).To(Equal(3), "%v", pods)
			// lc weighs an active connection 256 times an inactive one: the
			// backend whose connection is closing now has the fewest.
			held[1].Abort()
			next := holdOpen(l, "c-1", "10.96.0.10:80")
			Expect(askHeld(next).Pod).To(Equal(pods[1]))
			again := holdOpen(l, "c-1", "10.96.0.10:80")
			Expect(askHeld(again).Pod).NotTo(Equal(pods[1]), "now it has an active one again, like the others")
		})
	})
})
