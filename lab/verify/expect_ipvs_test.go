package verify

import (
	"testing"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/traffic"
)

// TestExpectIPVSPolicies holds the model to the places where proxy.ModelIPVS mode differs
// from iptables mode.
func TestExpectIPVSPolicies(t *testing.T) {
	checkPolicies(t, proxy.ModelIPVS, []policyCase{
		// internalTrafficPolicy Local without a local endpoint: a virtual server
		// without real servers refuses (iptables mode drops).
		{"probe-1", "default/node-local:http", "", traffic.Answered, "10.244.1.2:8080 (src 10.244.1.3)"},
		{"probe-3", "default/node-local:http", "", traffic.Refused, ""},
		{"node-3", "default/node-local:http", "", traffic.Refused, ""},
		// externalTrafficPolicy Local from outside: the local endpoint, client
		// address kept; node-3 has none, and its virtual server sends to the
		// others without masquerade: their replies bypass node-3.
		{"remote", "default/edge:http", "node-1", traffic.Answered, "10.244.1.2:8080 (src 192.168.7.100)"},
		{"remote", "default/edge:http", "node-3", traffic.Timeout, ""},
		// The same from a pod on node-3 answers (kubernetes#97081): replies to a pod
		// come back through its node.
		{"probe-3", "default/edge:http", "node-3", traffic.Answered, "10.244.1.2:8080 (src 10.244.3.3), 10.244.2.2:8080 (src 10.244.3.3)"},
		// ...and from node-3 itself, replies being addressed to it.
		{"node-3", "default/edge:http", "node-3", traffic.Answered, "10.244.1.2:8080 (src 192.168.7.13), 10.244.2.2:8080 (src 192.168.7.13)"},
		// No short circuit for pods: node-1's virtual server holds its local
		// endpoint only (iptables mode sends a pod to any endpoint).
		{"probe-3", "default/edge:http", "node-1", traffic.Answered, "10.244.1.2:8080 (src 10.244.3.3)"},
		// A node reaching its own Local NodePort is not masqueraded.
		{"node-1", "default/edge:http", "node-1", traffic.Answered, "10.244.1.2:8080 (src 192.168.7.11)"},
		// Terminating but serving: kube-proxy falls back to it.
		{"remote", "default/draining", "node-1", traffic.Answered, "10.244.3.2:8080 (src 192.168.7.11)"},
		// Affinity: one of the backends.
		{"probe-1", "default/sticky", "", traffic.Answered, "one of 10.244.1.2:8080 (src 10.244.1.3), 10.244.2.2:8080 (src 10.244.1.3)"},
	})
}

func TestExpectIPVSMasqueradeAll(t *testing.T) {
	web := mustLoad(t, "../../topologies/web.yaml")
	c := proxy.Config{KubeProxy: kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: web.ClusterCIDR.String(), IPTables: kubeproxyconfig.KubeProxyIPTablesConfiguration{MasqueradeAll: true}}}
	got := expectWith(t, proxy.ModelIPVS, web, c, "client", "default/web:http", "").String()
	if want := "10.244.1.10:8080 (src 10.244.1.1), 10.244.2.10:8080 (src 192.168.1.10)"; got != want {
		t.Errorf("masquerade-all: %s, want %s", got, want)
	}
}
