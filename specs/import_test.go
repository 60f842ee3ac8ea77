package specs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab/differential"
	"github.com/svclab/svclab/lab/importer"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/verify"
)

// The round trip of `svclab import` (issue 19): a lab with a control plane dumps
// itself as a user dumps a cluster (`svclab kubectl LAB -- get
// nodes,services,endpointslices,pods -A -o yaml`), the dump is imported (with the
// lab's clients and external IP routes, which no cluster object holds), and the
// imported lab, built with a control plane too, holds the same rules on every
// node, plans the same verify checks, and passes them with the same results
// (loadbalancers.yaml: rules and plan only, see below). It runs in one mode
// only, the first of svclab's iptables modes SVCLAB_MODES lists, for its time:
// two labs with an API server per topology.
var _ = Describe("svclab import: a lab's own dump, imported, is the same lab", Label("import"), func() {
	i := slices.IndexFunc(ownModes(), func(m modeCase) bool { return m.model() == proxy.ModelIPTables })
	if i < 0 {
		return
	}
	m := ownModes()[i]
	for _, file := range []string{"../topologies/web.yaml", "../topologies/httpd.yaml", "testdata/loadbalancers.yaml"} {
		It("round-trips "+filepath.Base(file)+" through kubectl and import: same checks, same rules per node, same results, "+m.label, Label(m.label), func() {
			orig, err := topology.Load(file)
			Expect(err).NotTo(HaveOccurred())
			o := m.options()
			o.ControlPlane, o.KubeBinary = true, kubeBinary
			a := upLab(orig, o)

			dump, err := exec.Command(svclabBin, "kubectl", a.ID, "--", "get", "nodes,services,endpointslices,pods", "-A", "-o", "yaml").Output()
			Expect(err).NotTo(HaveOccurred(), "%s", dump)
			path := filepath.Join(GinkgoT().TempDir(), "cluster.yaml")
			Expect(os.WriteFile(path, dump, 0o644)).To(Succeed())
			var opts importer.Options
			for _, c := range orig.Clients {
				opts.Clients = append(opts.Clients, topology.ClientSpec{Name: c.Name, IP: c.IP.String()})
			}
			for _, r := range orig.ExternalIPRoutes {
				opts.ExternalIPRoutes = append(opts.ExternalIPRoutes, topology.ExternalIPRouteSpec{IP: r.IP.String(), Nodes: r.Nodes})
			}
			data, res, err := importer.Import([]string{path}, opts)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("imported %s:\n%s\nnotes: %q\n", file, data, res.Notes)
			imported, err := topology.Parse(path+" imported", data)
			Expect(err).NotTo(HaveOccurred())
			b := upLab(imported, o)

			for _, n := range orig.Nodes {
				want, err := differential.Snapshot(a, n.Name)
				Expect(err).NotTo(HaveOccurred())
				got, err := differential.Snapshot(b, n.Name)
				Expect(err).NotTo(HaveOccurred())
				Expect(got).To(Equal(want), "node %s: the imported lab's rules", n.Name)
			}
			model, err := verify.ModelOf(m.mode.Name)
			Expect(err).NotTo(HaveOccurred())
			pa := verify.Derive(a.Topology(), model, a.ProxyConfig()).Checks(m.label)
			pb := verify.Derive(b.Topology(), model, b.ProxyConfig()).Checks(m.label)
			Expect(summaries(pb)).To(Equal(summaries(pa)), "the imported lab's planned checks")

			// The other shapes users bring, from the same API server: Endpoints
			// instead of slices (`get svc,ep`), and `cluster-info dump`'s tree of
			// typed lists with no endpoints at all (the importer makes them from
			// the pods, as the EndpointSlice controller does). Each plans the
			// same checks; the notes say where the endpoints came from.
			epDump, err := exec.Command(svclabBin, "kubectl", a.ID, "--", "get", "nodes,services,endpoints,pods", "-A", "-o", "yaml").Output()
			Expect(err).NotTo(HaveOccurred(), "%s", epDump)
			epPath := filepath.Join(GinkgoT().TempDir(), "svc-ep.yaml")
			Expect(os.WriteFile(epPath, epDump, 0o644)).To(Succeed())
			infoDir := filepath.Join(GinkgoT().TempDir(), "cluster-info")
			out, err := runSvclab("kubectl", a.ID, "--", "cluster-info", "dump", "--all-namespaces", "--output-directory", infoDir)
			Expect(err).NotTo(HaveOccurred(), out)
			for _, shape := range []struct{ input, note string }{
				{epPath, "its endpoints are its Endpoints object's"},
				{infoDir, "as the EndpointSlice controller makes them"},
			} {
				data, res, err := importer.Import([]string{shape.input}, opts)
				Expect(err).NotTo(HaveOccurred(), shape.input)
				GinkgoWriter.Printf("imported %s:\n%s\nnotes: %q\n", shape.input, data, res.Notes)
				Expect(res.Notes).To(ContainElement(ContainSubstring(shape.note)), shape.input)
				t, err := topology.Parse(shape.input+" imported", data)
				Expect(err).NotTo(HaveOccurred())
				// As the lab b holds it: with its control plane (and its DNS).
				Expect(t.EnableControlPlane()).To(Succeed())
				pc := verify.Derive(t, model, a.ProxyConfig()).Checks(m.label)
				Expect(summaries(pc)).To(Equal(summaries(pa)), "the checks planned from %s", shape.input)
			}
			if filepath.Base(file) == "loadbalancers.yaml" {
				// Its checks wait out every dropped connection (some 55 s a run
				// here): with the same rules on every node and the same plan,
				// the traffic is the verify spec's (which passes it in every
				// mode), not run twice more here.
				return
			}
			ca, err := verify.Run(context.Background(), a, m.label)
			Expect(err).NotTo(HaveOccurred())
			cb, err := verify.Run(context.Background(), b, m.label)
			Expect(err).NotTo(HaveOccurred())
			Expect(summaries(cb)).To(Equal(summaries(ca)), "the imported lab's checks and results")
			Expect(ca).NotTo(BeEmpty())
			for _, c := range ca {
				Expect(c.Passed).To(BeTrue(), "the original lab: %s: expected %s, observed %s", c.Name, c.Expected, c.Observed)
			}

			if filepath.Base(file) != "web.yaml" {
				return
			}
			// Negative control: the original's Service changed through its API
			// server (ClientIP affinity) and its nodes' rules no longer equal
			// the imported lab's.
			out, err = runSvclab("kubectl", a.ID, "--", "patch", "service", "web", "-p", `{"spec":{"sessionAffinity":"ClientIP"}}`)
			Expect(err).NotTo(HaveOccurred(), out)
			Eventually(func() (string, error) { return differential.Snapshot(a, "node-1") }).WithTimeout(time.Minute).WithPolling(time.Second).
				Should(ContainSubstring("--rcheck"), "the original lab's proxier follows the patch")
			want, err := differential.Snapshot(a, "node-1")
			Expect(err).NotTo(HaveOccurred())
			got, err := differential.Snapshot(b, "node-1")
			Expect(err).NotTo(HaveOccurred())
			Expect(got).NotTo(Equal(want))
		})
	}
})

// summaries are the checks as a comparison of two runs sees them: what was
// checked, what was expected and whether it passed (the observations name
// ephemeral ports and counts, which differ from run to run).
func summaries(checks []verify.Check) []string {
	var out []string
	for _, c := range checks {
		passed := "FAIL"
		if c.Passed {
			passed = "PASS"
		}
		out = append(out, passed+" "+c.Name+": "+c.Expected)
	}
	slices.Sort(out)
	return out
}

// Seed 002's cluster as its kubectl printed it, imported: its kubernetes
// Service is kept, its endpoint the API server on master's own address (host
// network), which master's namespace serves; every check passes, those from
// master to its own endpoint with master's address as the source (a locally
// delivered packet is not masqueraded). Without the node's server the
// kubernetes checks are refused; with the old expectation (the bridge's
// address) master's fails.
var _ = Describe("svclab import: seed 002's cluster, its API server on a node", Label("import"), func() {
	i := slices.IndexFunc(ownModes(), func(m modeCase) bool { return m.model() == proxy.ModelIPTables })
	if i < 0 {
		return
	}
	m := ownModes()[i]
	It("passes every check, the kubernetes Service's to master's own address included, "+m.label, Label(m.label), func() {
		data, _, err := importer.Import([]string{"../lab/importer/testdata/seed002/cluster.yaml", "../lab/importer/testdata/seed002/kube-proxy.yaml"}, importer.Options{Name: "seed002"})
		Expect(err).NotTo(HaveOccurred())
		t, err := topology.Parse("seed002 imported", data)
		Expect(err).NotTo(HaveOccurred())
		_, ok := t.Service("default", "kubernetes")
		Expect(ok).To(BeTrue(), "the kubernetes Service is kept")
		l := upLab(t, m.options())
		checks, err := verify.Run(context.Background(), l, m.label)
		Expect(err).NotTo(HaveOccurred())
		kubernetes := 0
		for _, c := range checks {
			Expect(c.Passed).To(BeTrue(), "%s: expected %s, observed %s", c.Name, c.Expected, c.Observed)
			if strings.Contains(c.Name, "default/kubernetes") {
				kubernetes++
			}
		}
		Expect(kubernetes).To(BeNumerically(">", 0), "checks of the kubernetes Service")
	})
})
