package specs

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/differential"
	"github.com/svclab/svclab/lab/proxies"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
)

// corpusSeeds and corpusServices fix the generated corpus the differential check
// runs on (topology.Corpus): the same Services every run, so that a failure can
// be built again with `svclab`'s own tools from the same seed.
var corpusSeeds = []uint64{1, 2}

const corpusServices = 30

// The differential check (issue 10, item 5): svclab's own proxier and the real
// kube-proxy program the same lab state, and every node must hold the same rules
// (lab/differential: iptables-save modulo counters, chain order and the order of
// Services in dispatch chains; for IPVS also ipvsadm -Ln and ipset save). It runs
// for every mode SVCLAB_MODES lists both ways: iptables-nft with
// kube-proxy-iptables-nft on this kernel, ipvs with kube-proxy-ipvs in the VM.
// It is a spec, not a Go test, because the suite is what CI runs on both kernels
// with the component binary at hand, and the modes it compares are the suite's.
var _ = Describe("The differential check: svclab's proxier against kube-proxy", Label("differential"), func() {
	for _, m := range ownModes() {
		if !selected(proxy.KubeProxyPrefix + m.label) {
			continue
		}
		o := differential.Options{Mode: m.mode.Name, Up: func(ctx context.Context, t *topology.Topology, kubeProxy bool) (differential.Lab, error) {
			lo := lab.Options{Mode: m.mode.Name, Proxy: proxy.Config{Backend: m.backend}, KubeBinary: kubeBinary}
			if kubeProxy {
				lo.KubeProxy = &proxies.KubeProxyOptions{}
			} else {
				lo.ControlPlane = true
			}
			return lab.Up(ctx, t, lo)
		}}
		labs := []struct {
			name string
			topo func() *topology.Topology
		}{
			{"web.yaml", func() *topology.Topology { return shipped("web.yaml") }},
			{"httpd.yaml", func() *topology.Topology { return shipped("httpd.yaml") }},
		}
		for _, seed := range corpusSeeds {
			labs = append(labs, struct {
				name string
				topo func() *topology.Topology
			}{fmt.Sprintf("the corpus of seed %d (%d Services)", seed, corpusServices), func() *topology.Topology {
				t, err := topology.Corpus(seed, corpusServices)
				Expect(err).NotTo(HaveOccurred())
				return t
			}})
		}
		for _, tc := range labs {
			Context(tc.name+", "+m.label, Ordered, Label(m.label, proxy.KubeProxyPrefix+m.label), func() {
				var p *differential.Pair
				BeforeAll(func() {
					p = upPair(tc.topo(), o)
				})

				It("programs every node as kube-proxy does", func() {
					diffs, err := p.Diff()
					Expect(err).NotTo(HaveOccurred())
					Expect(diffs).To(BeEmpty(), "%s", joinDiffs(diffs))
				})

				if tc.name != "web.yaml" {
					return
				}
				It("negative control: one rule changed in what svclab's proxier wrote fails the check, naming it", func() {
					changed := changeOneRule(p, m)
					diffs, err := p.Diff()
					Expect(err).NotTo(HaveOccurred())
					Expect(diffs).To(HaveLen(1), "only node-1 was changed")
					Expect(diffs[0].Node).To(Equal("node-1"))
					Expect(diffs[0].Diff).To(ContainSubstring("+"+changed), "the diff shows the changed rule on svclab's side")
					GinkgoWriter.Printf("the check's report on the changed rule:\n%s\n", diffs[0])
				})
			})
		}
	}
})

// selected tells whether SVCLAB_MODES runs the mode labelled label.
func selected(label string) bool {
	for _, m := range modes {
		if m.label == label {
			return true
		}
	}
	return false
}

// upPair builds the two labs of a differential check, torn down when the
// enclosing container ends.
func upPair(t *topology.Topology, o differential.Options) *differential.Pair {
	// No deadline of its own, like upLab's: under TCG on a loaded machine an API
	// server took more than five minutes to become ready.
	p, err := differential.UpPair(context.Background(), t, o)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(p.Down()).To(Succeed())
	})
	return p
}

func joinDiffs(diffs []differential.NodeDiff) string {
	var b strings.Builder
	for _, d := range diffs {
		b.WriteString(d.String() + "\n")
	}
	return b.String()
}

// changeOneRule changes one rule of web.yaml's Service on node-1 of the svclab
// lab of p, as a bug in svclab's proxier would have written it, and returns the
// changed rule as the check prints it.
func changeOneRule(p *differential.Pair, m modeCase) string {
	switch m.model() {
	case proxy.ModelIPTables:
		// The Service's first endpoint picked a quarter of the time, not half
		// (0.25 is exact in the statistic match's fixed point, so iptables-save
		// prints it as written).
		chain, rules := svcChainRules(p.Svclab.(*lab.Lab), m, "node-1", "10.96.123.45")
		changed := ""
		for i, line := range rules {
			if probability.MatchString(line) {
				rules[i] = probability.ReplaceAllString(line, "--probability 0.25000000000")
				changed = rules[i]
			}
		}
		Expect(changed).NotTo(BeEmpty())
		restoreChain(p.Svclab.(*lab.Lab), m, "node-1", chain, rules)
		return changed
	case proxy.ModelIPVS:
		// A real server of the Service at weight 0, as if it were terminating.
		h := ipvsAt(p.Svclab.(*lab.Lab), "node-1")
		svc := virtualServer(h, "10.96.123.45", 80)
		dests, err := h.GetDestinations(svc)
		Expect(err).NotTo(HaveOccurred())
		Expect(dests).NotTo(BeEmpty())
		d := dests[0]
		d.Weight = 0
		Expect(h.UpdateDestination(svc, d)).To(Succeed())
		return fmt.Sprintf("  -> %s:%d Masq 0", d.Address, d.Port)
	}
	Fail("no rule change is defined for mode " + m.label)
	return ""
}
