package specs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/topology"
)

// `svclab compare` on what a node's tools really print (issue 31): a lab
// node's own dump, read back from the kernel with the forms users bring
// (iptables-save -c with counters and iptables' own option order, for
// policies.yaml's ClientIP affinity `-m recent --set --name ... --mask ...
// --rsource`; in IPVS mode `ipvsadm -Sn` and the ipset of the kernel's
// release, which prints bucketsize and initval), is equal to what kube-proxy
// would write for the topology. Negative control: the same dump against the
// topology with api-1 not ready names api-1's endpoint as stale, exit 1.
//
// With the real kube-proxy (the kube-proxy-* modes) the node's dump is
// compared with what the real kube-proxy writes in a throwaway lab compare
// builds of the topology (`nft list ruleset` in nftables mode, which svclab
// renders no rules of): the lab's node is equal, and api-1 not ready is named.
var _ = Describe("svclab compare reads a lab node's real dumps", Label("compare"), func() {
	const file = "testdata/policies.yaml"
	for _, m := range modes {
		It("finds node-1's own "+m.label+" dump equal to the topology's rules, and names an endpoint that differs", Label(m.label), func() {
			topo, err := topology.Load(file)
			Expect(err).NotTo(HaveOccurred())
			l := upLab(topo, m.options())
			ns := netnsOf(l, "node-1")

			var dump strings.Builder
			mode := m.mode.Name
			if m.model() == proxy.ModelNFTables {
				out, err := namespaces.Output(ns, "nft", "list", "ruleset")
				Expect(err).NotTo(HaveOccurred(), "%s", out)
				dump.Write(out)
			} else {
				save, err := namespaces.Output(ns, xtables.SaveProgram(m.backend), "-c")
				Expect(err).NotTo(HaveOccurred(), "%s", save)
				Expect(string(save)).To(MatchRegexp(`(?m)^\[\d+:\d+\] -A `), "iptables-save -c prints counters before rules")
				dump.Write(save)
			}
			if m.model() == proxy.ModelIPVS {
				for _, argv := range [][]string{{"ipvsadm", "-Sn"}, {"ipset", "save"}} {
					out, err := namespaces.Output(ns, argv...)
					Expect(err).NotTo(HaveOccurred(), "%s", out)
					dump.Write(out)
				}
			}
			path := filepath.Join(GinkgoT().TempDir(), "node-1.dump")
			Expect(os.WriteFile(path, []byte(dump.String()), 0o644)).To(Succeed())
			compareArgs := func(topo string) []string {
				a := []string{"compare", "-f", topo, "--mode", mode, "--node", "node-1"}
				if m.kubeProxy {
					a = append(a, "--proxy", "kube-proxy", "--backend", m.backend)
				}
				return append(a, path)
			}

			out, err := exec.Command(svclabBin, compareArgs(file)...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "svclab compare of the node's own dump:\n%s\ndump:\n%s", out, dump.String())
			Expect(string(out)).To(ContainSubstring("node node-1 holds what kube-proxy"))

			api1, ok := l.Topology().Pod("default/api-1")
			Expect(ok).To(BeTrue())
			src, err := os.ReadFile(file)
			Expect(err).NotTo(HaveOccurred())
			edited := strings.Replace(string(src), "  - name: api-1\n    node: node-1\n", "  - name: api-1\n    node: node-1\n    ready: false\n", 1)
			Expect(edited).NotTo(Equal(string(src)))
			notReady := filepath.Join(GinkgoT().TempDir(), "policies.yaml")
			Expect(os.WriteFile(notReady, []byte(edited), 0o644)).To(Succeed())
			out, err = exec.Command(svclabBin, compareArgs(notReady)...).CombinedOutput()
			var exit *exec.ExitError
			Expect(err).To(BeAssignableToTypeOf(exit), "%s", out)
			Expect(err.(*exec.ExitError).ExitCode()).To(Equal(1), "%s", out)
			Expect(string(out)).To(ContainSubstring("endpoint "+api1.IP.String()), "the report names api-1's endpoint")
		})
	}
})
