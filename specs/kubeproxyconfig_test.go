package specs

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
)

// `svclab verify --kube-proxy-config F` holds the lab to what kube-proxy does
// when configured with F, with the real kube-proxy and with svclab's proxiers:
// each local-traffic detector kube-proxy has (and none, without a clusterCIDR)
// on the shipped web and httpd labs and on policies-local.yaml, whose Local
// Services tell the detectors apart (a pod's connection to an external address
// of one goes to the Cluster chain only when the detector takes it for local).
// Each run is also held to --plan as nobody, and the plan to differ from the one
// without F wherever F changes what must happen, so a configuration that did not
// reach the expectations fails.
var _ = Describe("svclab verify --kube-proxy-config", Label("verify", "kube-proxy-config"), func() {
	configs := []struct {
		name, text string
		// labs are the labs the configuration runs on; changes, those whose
		// expectations it changes.
		labs, changes []string
	}{
		{"detectLocalMode NodeCIDR", "detectLocalMode: NodeCIDR\n",
			[]string{"web.yaml", "httpd.yaml", "policies-local.yaml"}, []string{"policies-local.yaml"}},
		{"an empty clusterCIDR", "clusterCIDR: \"\"\n",
			[]string{"web.yaml", "httpd.yaml", "policies-local.yaml"}, []string{"web.yaml", "httpd.yaml", "policies-local.yaml"}},
		{"detectLocalMode BridgeInterface", "detectLocalMode: BridgeInterface\ndetectLocal:\n  bridgeInterface: cni0\n",
			[]string{"policies-local.yaml"}, []string{"policies-local.yaml"}},
		{"detectLocalMode InterfaceNamePrefix", "detectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: cni\n",
			[]string{"policies-local.yaml"}, []string{"policies-local.yaml"}},
	}
	text := map[string]func() []byte{
		"web.yaml":            func() []byte { return shippedText("web.yaml") },
		"httpd.yaml":          func() []byte { return shippedText("httpd.yaml") },
		"policies-local.yaml": func() []byte { return readFile("testdata/policies-local.yaml") },
	}
	for _, m := range modes {
		if m.model() == proxy.ModelIPVS {
			// svclab's IPVS proxier takes the ClusterCIDR detector only, and
			// kube-proxy's IPVS mode under these has not run in the VM yet.
			continue
		}
		if m.model() == proxy.ModelIPTables {
			// verify makes no connection to 127.0.0.1, so this one is made here:
			// with localhostNodePorts false nothing translates a node's own
			// connection to 127.0.0.1:NodePort, and nothing listens there (the
			// shipped NodePort spec holds the default, where it is answered).
			It("refuses a node's connection to 127.0.0.1:NodePort with iptables.localhostNodePorts false, "+m.label, Label(m.label), func() {
				o := m.options()
				off := false
				o.Proxy.KubeProxy.IPTables.LocalhostNodePorts = &off
				if m.kubeProxy {
					f, err := kube.NewProxyFragment("the spec", map[string]any{"iptables": map[string]any{"localhostNodePorts": false}})
					Expect(err).NotTo(HaveOccurred())
					o.KubeProxy.Fragment = f
				}
				l := upLab(parse("web.yaml", string(shippedText("web.yaml"))), o)
				Expect(outcome(l, "node-1", "TCP", "127.0.0.1:30080", time.Second)).To(Equal(traffic.Refused))
				backendsSeen(l, "node-1", "TCP", "192.168.1.10:30080", "web-a", "web-b")
			})
		}
		for _, c := range configs {
			for _, name := range c.labs {
				It("passes every check on "+name+" with "+c.name+", "+m.label, Label(m.label), func() {
					dir := nobodyDir()
					// The cluster DNS is off: no detector changes a lookup, the
					// verify and dns specs hold CoreDNS to its checks, and its 310
					// lookups on policies-local were most of a kube-proxy run's minute.
					lab := writeFile(dir, name, append([]byte("dns: false\n"), text[name]()...))
					cfg := writeFile(dir, "kube-proxy.yaml", []byte(c.text))
					args := append(modeArgs(m), "-f", lab, "--kube-proxy-config", cfg)

					rep, code := verifyAsRoot(args...)
					var failed []string
					for _, ch := range rep.Checks {
						if !ch.Passed {
							failed = append(failed, ch.Name+": expected "+ch.Expected+", observed "+ch.Observed+" ("+ch.Why+")")
						}
					}
					Expect(failed).To(BeEmpty(), "%d of %d checks failed", len(failed), len(rep.Checks))
					Expect(code).To(Equal(0))
					Expect(rep.Checks).NotTo(BeEmpty())

					By("svclab verify --plan, as nobody, lists exactly these checks")
					plan := planAsNobody(dir, args...)
					Expect(plan.Checks).To(Equal(asPlanned(rep.Checks)))
					without := planAsNobody(dir, append(modeArgs(m), "-f", lab)...)
					Expect(without.Checks).To(HaveLen(len(plan.Checks)))
					if slices.Contains(c.changes, name) {
						Expect(without.Checks).NotTo(Equal(plan.Checks), "%s changes no expectation on %s", c.name, name)
					} else {
						Expect(without.Checks).To(Equal(plan.Checks))
					}
				})
			}
		}
	}
})
