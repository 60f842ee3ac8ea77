package verify

import (
	"testing"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/version"
)

// TestPlanChecks: a plan's checks are the checks a run reports, with nothing
// observed and nothing passed.
func TestPlanChecks(t *testing.T) {
	web := mustLoad(t, "../../topologies/web.yaml")
	plan := Derive(web, proxy.ModelIPTables, proxy.Config{KubeProxy: kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: web.ClusterCIDR.String()}, Version: version.Default})
	// Seven members to the ClusterIP and two NodePorts.
	if len(plan.Flows) != 18 {
		t.Fatalf("%d flows, want 18", len(plan.Flows))
	}
	checks := plan.Checks("iptables-nft")
	for i, c := range checks {
		f := plan.Flows[i]
		if c.Name != f.Name || c.Mode != "iptables-nft" || c.From != f.Source.Name || c.To != f.To || c.Service != "default/web:http" ||
			c.Protocol != "TCP" || c.Expected != f.Expected.String() || c.Why != f.Expected.Why {
			t.Errorf("check %d %+v does not say what flow %+v does", i, c, f)
		}
		if c.Observed != "" || c.Passed || c.Attempts != 0 {
			t.Errorf("check %d: planned, yet observed %q, passed %t, %d attempts", i, c.Observed, c.Passed, c.Attempts)
		}
	}
}

// TestModelOf: verify takes each registered mode's model from its registration,
// and has expectations for every one.
func TestModelOf(t *testing.T) {
	if len(proxy.Modes()) == 0 {
		t.Fatal("no mode registered")
	}
	for _, name := range proxy.Modes() {
		mode, _ := proxy.Lookup(name)
		if m, err := ModelOf(name); err != nil || m != mode.Dataplane.Model {
			t.Errorf("ModelOf(%q) = %v, %v; want %v", name, m, err, mode.Dataplane.Model)
		}
	}
	if _, err := ModelOf("bpf"); err == nil {
		t.Error("ModelOf(bpf): no error for a mode nobody registered")
	}
}
