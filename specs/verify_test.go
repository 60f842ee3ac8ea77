package specs

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/verify"
)

// `svclab verify`'s expectations are derived from the topology alone; these specs
// hold them against the kernel on the shipped labs and on labs written for the
// specs, every check of every flow.
var _ = Describe("svclab verify", Label("verify"), func() {
	labs := map[string]func() *topology.Topology{
		"web.yaml":      func() *topology.Topology { return shipped("web.yaml") },
		"httpd.yaml":    func() *topology.Topology { return shipped("httpd.yaml") },
		"services lab":  func() *topology.Topology { return parse("services.yaml", servicesLab) },
		"policies.yaml": func() *topology.Topology { return fromFile("testdata/policies.yaml") },
		"policies-local.yaml": func() *topology.Topology {
			return fromFile("testdata/policies-local.yaml")
		},
	}
	for _, m := range modes {
		for name, topo := range labs {
			It("passes every check on "+name+", "+m.label, func() {
				l := upLab(topo(), m.options())
				checks, err := verify.Run(context.Background(), l, m.label)
				Expect(err).NotTo(HaveOccurred())
				Expect(checks).NotTo(BeEmpty())
				var failed []string
				for _, c := range checks {
					if !c.Passed {
						failed = append(failed, c.Name+": expected "+c.Expected+", observed "+c.Observed+" ("+c.Why+")")
					}
				}
				Expect(failed).To(BeEmpty(), "%d of %d checks failed:\n%s", len(failed), len(checks), strings.Join(failed, "\n"))
			})
		}

		It("negative control: fails exactly the refusals a DROP swallows, "+m.label, func() {
			l := upLab(parse("services.yaml", servicesLab), m.options())
			// Service empty has no endpoints, so every connection to its ClusterIP
			// must be refused. A DROP in raw, ahead of the proxy's REJECT (or of
			// IPVS), on every node turns each of those refusals into silence.
			const emptyVIP = "10.96.123.49"
			be, err := xtables.BackendFor(m.backend) // IPVS mode's own rules use the default
			Expect(err).NotTo(HaveOccurred())
			for _, node := range []string{"node-1", "node-2", "node-3"} {
				for _, hook := range []string{"PREROUTING", "OUTPUT"} {
					_, err := namespaces.Output(netnsOf(l, node), be.IPTables, "-t", "raw", "-I", hook, "-d", emptyVIP, "-j", "DROP")
					Expect(err).NotTo(HaveOccurred())
				}
			}
			checks, err := verify.Run(context.Background(), l, m.label)
			Expect(err).NotTo(HaveOccurred())
			var wrong []string
			swallowed := 0
			for _, c := range checks {
				dropped := c.Expected == "refused" && strings.Contains(c.To, emptyVIP+":")
				if dropped {
					swallowed++
				}
				if c.Passed == dropped {
					wrong = append(wrong, fmt.Sprintf("%s: passed=%t, observed %s", c.Name, c.Passed, c.Observed))
				}
			}
			Expect(swallowed).To(BeNumerically(">", 0))
			Expect(wrong).To(BeEmpty(), "every refusal of %s must fail and every other check pass:\n%s", emptyVIP, strings.Join(wrong, "\n"))
		})
	}
})

func fromFile(path string) *topology.Topology {
	t, err := topology.Load(path)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return t
}
