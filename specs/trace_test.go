package specs

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/trace"
)

// traceLab: one backend (web-1, on node-2), so that every translation is
// known in advance; a client pod on node-1 and a client outside. web is a
// ClusterIP, web-np a NodePort (masqueraded from outside), web-local a
// NodePort with externalTrafficPolicy Local (no endpoint on node-1), empty a
// Service without endpoints.
const traceLab = `
name: tr
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
    ports: [{containerPort: 8080}]
  - {name: client, node: node-1, ip: 10.244.1.5}
clients:
  - {name: outside, ip: 192.168.1.100}
services:
  - apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec:
      clusterIP: 10.96.0.10
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: 8080}]
  - apiVersion: v1
    kind: Service
    metadata: {name: web-np}
    spec:
      type: NodePort
      clusterIP: 10.96.0.11
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30081}]
  - apiVersion: v1
    kind: Service
    metadata: {name: web-local}
    spec:
      type: NodePort
      clusterIP: 10.96.0.12
      externalTrafficPolicy: Local
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
  - apiVersion: v1
    kind: Service
    metadata: {name: empty}
    spec:
      clusterIP: 10.96.0.20
      selector: {app: nothing}
      ports: [{name: http, port: 80, targetPort: 8080}]
`

// rulesIn are the rules a trace saw in a member, in order.
func rulesIn(t *trace.Trace, member string) []trace.Rule {
	for _, h := range t.Hops {
		if h.Member != member {
			continue
		}
		var rules []trace.Rule
		for _, k := range h.Hooks {
			rules = append(rules, k.Rules...)
		}
		return append(rules, h.Counters...)
	}
	return nil
}

// hop is the trace's hop through member.
func hop(t *trace.Trace, member string) trace.Hop {
	for _, h := range t.Hops {
		if h.Member == member {
			return h
		}
	}
	Fail("the trace does not cross " + member)
	return trace.Hop{}
}

// chainsIn are the chains of the rules a trace saw in a member, in order.
func chainsIn(t *trace.Trace, member string) []string {
	var chains []string
	for _, r := range rulesIn(t, member) {
		if len(chains) == 0 || chains[len(chains)-1] != r.Chain {
			chains = append(chains, r.Chain)
		}
	}
	return chains
}

// inOrder tells whether chains holds, in order, a chain starting with each
// prefix.
func inOrder(chains []string, prefixes ...string) bool {
	i := 0
	for _, c := range chains {
		if i < len(prefixes) && strings.HasPrefix(c, prefixes[i]) {
			i++
		}
	}
	return i == len(prefixes)
}

var _ = Describe("Trace", func() {
	for _, m := range modes {
		Context(m.label, Label(m.label, "trace"), Ordered, func() {
			var l *lab.Lab
			BeforeAll(func() {
				l = upLab(parse("tr.yaml", traceLab), m.options())
			})
			dumpOnFailure(&l)
			run := func(from, to string, timeout time.Duration) *trace.Trace {
				t, err := trace.Run(ctx(), trace.FromRecord(l.Record()), trace.Request{From: from, To: netip.MustParseAddrPort(to), Timeout: timeout})
				ExpectWithOffset(1, err).NotTo(HaveOccurred())
				var b strings.Builder
				t.WriteText(&b)
				GinkgoWriter.Println(b.String())
				return t
			}
			// serviceChains are the prefixes of the chains a ClusterIP's
			// packet goes through, in order, and dnat the text of the rule
			// that translates to backend, as the mode writes them.
			serviceChains := func() []string {
				if m.model() == proxy.ModelNFTables {
					// The services map's element, then the Service's chain
					// (kube-proxy 1.37 dnats a lone endpoint there, as the
					// trace shows, without an endpoint- chain).
					return []string{"services", "service-"}
				}
				return []string{"KUBE-SERVICES", "KUBE-SVC-", "KUBE-SEP-"}
			}
			dnat := func(backend netip.AddrPort) string {
				if m.model() == proxy.ModelNFTables {
					return "dnat to " + backend.String()
				}
				return "--to-destination " + backend.String()
			}
			var first *trace.Trace

			It("names a ClusterIP's chains in order, the DNAT to the endpoint that answered and the conntrack tuple", func() {
				t := run("client", "10.96.0.10:80", 0)
				first = t
				Expect(t.End.Outcome).To(Equal(trace.Answered))
				Expect(t.End.Pod).To(Equal("web-1"))
				backend := t.End.Backend
				Expect(backend).To(Equal(netip.MustParseAddrPort("10.244.2.10:8080")))
				if m.model() == proxy.ModelIPVS {
					Expect(hop(t, "node-1").IPVS).To(ContainElement(And(ContainSubstring("10.96.0.10:80"), ContainSubstring(backend.String()))))
				} else {
					Expect(inOrder(chainsIn(t, "node-1"), serviceChains()...)).To(BeTrue(), "chains %v in node-1, want %v in order", chainsIn(t, "node-1"), serviceChains())
					Expect(slices.ContainsFunc(rulesIn(t, "node-1"), func(r trace.Rule) bool { return strings.Contains(r.Text, dnat(backend)) })).To(BeTrue(), "a rule with %q", dnat(backend))
				}
				ct := hop(t, "node-1").Conntrack
				Expect(ct).NotTo(BeNil())
				Expect(ct.Original).To(Equal(trace.Tuple{Src: t.Source, Dst: netip.MustParseAddrPort("10.96.0.10:80")}))
				Expect(ct.Reply).To(Equal(trace.Tuple{Src: backend, Dst: t.Source}))
				Expect(t.End.Seen).To(Equal(t.Source), "a pod's flow to a ClusterIP keeps its source")
			})

			It("shows the SNAT of a masqueraded flow", func() {
				t := run("outside", "192.168.1.10:30081", 0)
				Expect(t.End.Outcome).To(Equal(trace.Answered))
				ct := hop(t, "node-1").Conntrack
				Expect(ct).NotTo(BeNil())
				Expect(ct.SNAT).NotTo(BeEmpty())
				Expect(ct.DNAT).To(Equal("192.168.1.10:30081 -> 10.244.2.10:8080"))
				Expect(t.End.Seen).To(Equal(ct.Reply.Dst), "the pod saw the source the entry records")
				Expect(t.End.Seen.Addr()).NotTo(Equal(t.Source.Addr()))
			})

			It("ends a Local NodePort on a node without local endpoints at the drop rule", func() {
				if m.model() == proxy.ModelIPVS {
					// IPVS mode gives such a node's virtual server the
					// cluster's endpoints (kubernetes#97081) without SNAT:
					// the trace shows IPVS's choice and the pod's node
					// getting the packet, whose answer then bypasses node-1
					// and never reaches the client as a reply.
					t := run("outside", "192.168.1.10:30080", time.Second)
					Expect(t.End.Outcome).To(Equal(trace.Dropped))
					Expect(hop(t, "node-1").IPVS).To(ContainElement(And(ContainSubstring("192.168.1.10:30080"), ContainSubstring("10.244.2.10:8080"))))
					ct := hop(t, "node-1").Conntrack
					Expect(ct).NotTo(BeNil())
					Expect(ct.SNAT).To(BeEmpty())
					Expect(hop(t, "node-2").Conntrack).NotTo(BeNil())
					return
				}
				t := run("outside", "192.168.1.10:30080", time.Second)
				Expect(t.End.Outcome).To(Equal(trace.Dropped))
				Expect(t.End.Member).To(Equal("node-1"))
				Expect(t.End.Rule).NotTo(BeNil())
				Expect(strings.ToLower(t.End.Rule.Verdict)).To(Equal("drop"), "%+v", t.End.Rule)
			})

			It("names the REJECT of a Service without endpoints", func() {
				t := run("client", "10.96.0.20:80", 0)
				Expect(t.End.Outcome).To(Equal(trace.Refused))
				if m.model() == proxy.ModelIPVS {
					// A virtual server without real servers: IPVS itself
					// answers port unreachable, no REJECT rule is involved.
					Expect(hop(t, "node-1").IPVS).To(BeEmpty())
					Expect(hop(t, "node-1").IPVSEmpty).To(ContainSubstring("10.96.0.20:80"))
					Expect(t.End.By).To(HavePrefix("IPVS: virtual service"))
					Expect(t.End.Member).To(Equal("node-1"))
					return
				}
				Expect(t.End.By).To(Equal("REJECT rule"))
				Expect(t.End.Member).To(Equal("node-1"))
				Expect(strings.ToLower(t.End.Rule.Text)).To(ContainSubstring("reject"))
			})

			It("no longer names a rule removed by hand (negative control)", func() {
				Expect(first).NotTo(BeNil(), "the ClusterIP spec ran first")
				node := netnsOf(l, "node-1")
				var gone string
				switch m.model() {
				case proxy.ModelNFTables:
					// The Service's own chain, which the services map's
					// element for the ClusterIP led to.
					i := slices.IndexFunc(rulesIn(first, "node-1"), func(r trace.Rule) bool {
						return r.Chain == "services" && strings.Contains(r.Verdict, " service-")
					})
					Expect(i).NotTo(BeNumerically("<", 0), "the first trace named the ClusterIP's map element")
					gone = strings.Fields(rulesIn(first, "node-1")[i].Verdict)[1]
					_, err := namespaces.Output(node, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.0.10 . tcp . 80 }")
					Expect(err).NotTo(HaveOccurred())
				case proxy.ModelIPVS:
					gone = "10.96.0.10:80"
					_, err := namespaces.Output(node, "ipvsadm", "-D", "-t", "10.96.0.10:80")
					Expect(err).NotTo(HaveOccurred())
				default:
					i := slices.IndexFunc(rulesIn(first, "node-1"), func(r trace.Rule) bool {
						return r.Chain == "KUBE-SERVICES" && strings.Contains(r.Text, "-j KUBE-SVC-")
					})
					Expect(i).NotTo(BeNumerically("<", 0), "the first trace named the ClusterIP's rule")
					rule := rulesIn(first, "node-1")[i]
					gone = rule.Text[strings.Index(rule.Text, "-j ")+3:]
					b, err := xtables.BackendFor(m.backend)
					Expect(err).NotTo(HaveOccurred())
					args := append([]string{b.IPTables, "-t", "nat", "-D"}, splitRule(strings.TrimPrefix(rule.Text, "-A "))...)
					_, err = namespaces.Output(node, args...)
					Expect(err).NotTo(HaveOccurred())
				}
				t := run("client", "10.96.0.10:80", time.Second)
				Expect(t.End.Outcome).NotTo(Equal(trace.Answered))
				for _, r := range rulesIn(t, "node-1") {
					Expect(r.Chain + " " + r.Text + " " + r.Verdict).NotTo(ContainSubstring(gone))
				}
				Expect(hop(t, "node-1").IPVS).To(BeEmpty())
			})
		})
	}
})

// splitRule splits a rule as iptables-save prints it into arguments: words,
// and double-quoted strings (comments) as one.
func splitRule(s string) []string {
	var args []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.Index(s[1:], `"`) + 1
			args = append(args, s[1:end])
			s = s[end+1:]
			continue
		}
		word, rest, _ := strings.Cut(s, " ")
		args, s = append(args, word), rest
	}
	return args
}
