package specs

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

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
	}
})

func fromFile(path string) *topology.Topology {
	t, err := topology.Load(path)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return t
}
