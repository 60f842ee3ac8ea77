package specs

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/traffic"
)

// distLab has Services over 2, 3 and 5 backends spread over three nodes, a
// ClientIP-affinity Service with a 2 s timeout, and twelve client pods.
func distLab() string {
	var b strings.Builder
	b.WriteString(`name: dist
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
  - {name: node-2, ip: 192.168.1.11, podCIDR: 10.244.2.0/24}
  - {name: node-3, ip: 192.168.1.12, podCIDR: 10.244.3.0/24}
pods:
`)
	for _, g := range []struct {
		app string
		n   int
	}{{"d2", 2}, {"d3", 3}, {"d5", 5}} {
		for i := 1; i <= g.n; i++ {
			fmt.Fprintf(&b, "  - {name: %s-%d, node: node-%d, labels: {app: %s}, ports: [{containerPort: 8080}]}\n", g.app, i, (i-1)%3+1, g.app)
		}
	}
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "  - {name: c-%d, node: node-%d}\n", i, (i-1)%3+1)
	}
	b.WriteString("services:\n")
	for i, app := range []string{"d2", "d3", "d5"} {
		fmt.Fprintf(&b, "  - {apiVersion: v1, kind: Service, metadata: {name: %s}, spec: {clusterIP: 10.96.0.%d, selector: {app: %s}, ports: [{port: 80, targetPort: 8080}]}}\n", app, 10+i, app)
	}
	b.WriteString(`  - apiVersion: v1
    kind: Service
    metadata: {name: sticky}
    spec:
      clusterIP: 10.96.0.20
      selector: {app: d3}
      sessionAffinity: ClientIP
      sessionAffinityConfig: {clientIP: {timeoutSeconds: 2}}
      ports: [{port: 80, targetPort: 8080}]
`)
	return b.String()
}

const distConnections = 1000

// distribution opens n new connections from one client and counts the backends.
func distribution(l *lab.Lab, from, to string, n int) map[string]int {
	counts := map[string]int{}
	d := dial(l, from, "TCP", to, 2*time.Second)
	for i := 0; i < n; i++ {
		r, err := traffic.Request(d)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		counts[r.Pod]++
	}
	return counts
}

func podNames(app string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", app, i+1)
	}
	return names
}

var _ = Describe("Load distribution", func() {
	for _, m := range modes {
		Context(m.label, Ordered, Label(m.label, "distribution"), func() {
			var l *lab.Lab
			BeforeAll(func() {
				l = upLab(parse("dist.yaml", distLab()), m.options())
			})
			dumpOnFailure(&l)

			DescribeTable(fmt.Sprintf("spreads %d new connections uniformly (chi-square, false-failure rate %g)", distConnections, uniformAlpha),
				func(app string, n int, vip string) {
					counts := distribution(l, "c-1", vip, distConnections)
					u := chiSquareUniform(counts, podNames(app, n))
					AddReportEntry("distribution "+app, u.String())
					Expect(u.Uniform()).To(BeTrue(), u.String())
					if m.model() == proxy.ModelIPVS {
						// rr is an exact rotation, not a random choice: one client's
						// sequential connections are spread to within one.
						for _, c := range u.Counts {
							Expect(c).To(BeNumerically("~", distConnections/n, 1), u.String())
						}
					}
				},
				Entry("over 2 backends", "d2", 2, "10.96.0.10:80"),
				Entry("over 3 backends", "d3", 3, "10.96.0.11:80"),
				Entry("over 5 backends", "d5", 5, "10.96.0.12:80"),
			)

			Describe("ClientIP session affinity", Label("affinity"), func() {
				var first map[string]string
				It("keeps each client on one backend", func() {
					first = map[string]string{}
					for i := 1; i <= 12; i++ {
						client := fmt.Sprintf("c-%d", i)
						counts := distribution(l, client, "10.96.0.20:80", 10)
						Expect(counts).To(HaveLen(1), "%s went to %v", client, counts)
						for pod := range counts {
							first[client] = pod
						}
					}
				})

				It("spreads different clients over the backends", func() {
					// Twelve clients all on one of three backends by chance: 3^-11.
					backends := map[string]bool{}
					for _, pod := range first {
						backends[pod] = true
					}
					Expect(len(backends)).To(BeNumerically(">=", 2), "%v", first)
				})

				if m.model() == proxy.ModelIPVS {
					// IPVS differs (kubernetes#89358): a persistence template whose
					// timer fires while connections it placed are still in IPVS's table
					// is kept 60 s more, again and again, and the closed connections of
					// the spec above stay there in FIN_WAIT/TIME_WAIT for up to two
					// minutes. The IPVS specs show the template expiring on time once
					// its connections are gone.
					It("keeps a client on its backend past timeoutSeconds while its closed connections linger in IPVS's table (kubernetes#89358)", func() {
						time.Sleep(3 * time.Second) // timeoutSeconds is 2
						for client, pod := range first {
							r, err := ask(l, client, "10.96.0.20:80")
							Expect(err).NotTo(HaveOccurred())
							Expect(r.Pod).To(Equal(pod), "%s still has its template", client)
						}
					})
					return
				}
				It("forgets a client after its timeout", func() {
					time.Sleep(3 * time.Second) // timeoutSeconds is 2
					moved := 0
					for client, pod := range first {
						r, err := ask(l, client, "10.96.0.20:80")
						Expect(err).NotTo(HaveOccurred())
						if r.Pod != pod {
							moved++
						}
					}
					// With the affinity gone each client picks anew: all twelve
					// picking their old backend again has a chance of 3^-12.
					Expect(moved).To(BeNumerically(">", 0))
				})
			})

			if !m.own() {
				// The test's own negative control runs in svclab's modes: the
				// chi-square test does not depend on who wrote the rules.
				return
			}
			It("negative control: the same test fails on a deliberately skewed rule set", func() {
				skew(l, m, "node-1", "10.96.0.10")
				counts := distribution(l, "c-1", "10.96.0.10:80", distConnections)
				u := chiSquareUniform(counts, podNames("d2", 2))
				AddReportEntry("skewed distribution", u.String())
				Expect(u.Uniform()).To(BeFalse(), "a 70/30 split must fail the uniformity test: "+u.String())
			})
		})
	}
})

var (
	svcJump     = regexp.MustCompile(`-d (\S+)/32 .* -j (KUBE-SVC-\w+)`)
	probability = regexp.MustCompile(`--probability \S+`)
)

// skew rewrites the rules of the Service at vip on node so that its first backend
// gets 70% of new connections. It is the last spec of its lab: the lab's proxier
// does not know its rules were changed behind its back.
func skew(l *lab.Lab, m modeCase, node, vip string) {
	switch m.model() {
	case proxy.ModelIPTables:
		chain, rules := svcChainRules(l, m, node, vip)
		skewed := 0
		for i, line := range rules {
			if probability.MatchString(line) {
				rules[i] = probability.ReplaceAllString(line, "--probability 0.7")
				skewed++
			}
		}
		Expect(skewed).To(Equal(1), "two endpoints: one rule picks the first with probability 1/2")
		restoreChain(l, m, node, chain, rules)
	case proxy.ModelIPVS:
		// kube-proxy gives every real server weight 1 and keeps to rr; here the
		// virtual server is switched to wrr and its two real servers weighted 7:3
		// over netlink in the node's namespace, as `ipvsadm -E -s wrr` and
		// `ipvsadm -e -w` would. wrr then sends exactly 7 of every 10 connections
		// to the first.
		h := ipvsAt(l, node)
		svc := virtualServer(h, vip, 80)
		svc.SchedName = "wrr"
		Expect(h.UpdateService(svc)).To(Succeed())
		dests, err := h.GetDestinations(svc)
		Expect(err).NotTo(HaveOccurred())
		Expect(dests).To(HaveLen(2))
		for i, d := range dests {
			d.Weight = []int{7, 3}[i]
			Expect(h.UpdateDestination(svc, d)).To(Succeed())
		}
	default:
		Fail("no skewed rule set is defined for mode " + m.label)
	}
}

// svcChainRules reads, from node's nat table, the KUBE-SVC chain that the Service
// at vip jumps to and its rules in iptables-save form.
func svcChainRules(l *lab.Lab, m modeCase, node, vip string) (string, []string) {
	out, err := namespaces.Output(netnsOf(l, node), xtables.SaveProgram(m.backend), "-t", "nat")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	lines := strings.Split(string(out), "\n")
	chain := ""
	for _, line := range lines {
		if mm := svcJump.FindStringSubmatch(line); mm != nil && mm[1] == vip {
			chain = mm[2]
		}
	}
	ExpectWithOffset(1, chain).NotTo(BeEmpty(), "the KUBE-SVC chain of %s", vip)
	var rules []string
	for _, line := range lines {
		if strings.HasPrefix(line, "-A "+chain+" ") {
			rules = append(rules, line)
		}
	}
	return chain, rules
}

// restoreChain replaces the rules of chain in node's nat table with rules, in one
// iptables-restore.
func restoreChain(l *lab.Lab, m modeCase, node, chain string, rules []string) {
	input := "*nat\n:" + chain + " - [0:0]\n" + strings.Join(rules, "\n") + "\nCOMMIT\n"
	restore := xtables.Backends[m.backend].Restore
	ExpectWithOffset(1, namespaces.Do(netnsOf(l, node), func() error { return runWithInput(input, restore, "--noflush") })).To(Succeed())
}
