package verify

import (
	"errors"
	"os"
	"strings"
	"testing"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/version"
)

// TestShippedFlowsAgreeWithModels: every flow of topologies/flows/web.yaml to a
// Service expects what both models plan for it, so the file holds in every mode;
// its one flow to no Service is refused by the node itself.
func TestShippedFlowsAgreeWithModels(t *testing.T) {
	web := mustLoad(t, "../../topologies/web.yaml")
	for _, m := range []proxy.Model{proxy.ModelIPTables, proxy.ModelIPVS} {
		plan, err := LoadFlows("../../topologies/flows/web.yaml", web, m)
		if err != nil {
			t.Fatal(err)
		}
		derived := map[string]Flow{}
		for _, f := range Derive(web, m, proxy.Config{KubeProxy: kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: web.ClusterCIDR.String()}, Version: version.Default}).Flows {
			derived[f.Source.Name+" "+f.To+" "+f.Protocol] = f
		}
		if len(plan.Flows) != 6 {
			t.Fatalf("%v: %d flows, want 6", m, len(plan.Flows))
		}
		for _, f := range plan.Flows {
			if f.Service == "" {
				if f.Expected.Outcome != traffic.Refused || f.To != "192.168.1.10:30080/UDP" {
					t.Errorf("%v: %s: %s %s, want the node's own refusal of UDP 192.168.1.10:30080", m, f.Name, f.To, f.Expected)
				}
				continue
			}
			d, ok := derived[f.Source.Name+" "+f.To+" "+f.Protocol]
			if !ok {
				t.Errorf("%v: %s: the model plans no flow from %s to %s", m, f.Name, f.Source.Name, f.To)
				continue
			}
			if f.Expected.String() != d.Expected.String() || f.Name == d.Name || f.Service != d.Service {
				t.Errorf("%v: %s: expects %s of %s, the model %s of %s", m, f.Name, f.Expected, f.Service, d.Expected, d.Service)
			}
		}
	}
}

// TestFlowsFile reads what a flows file can say into flows: one source for every
// backend or one per backend, any source when none is given, REJECT and DROP,
// affinity from the Service, attempts sized by the Service's endpoints, and names
// for flows that have none.
func TestFlowsFile(t *testing.T) {
	top := mustLoad(t, "../../specs/testdata/policies.yaml")
	plan, err := ParseFlows("policies.flows.yaml", []byte(`
flows:
  - from: probe-1
    to: 10.96.0.5:80
    expect: [10.244.1.2:8080, 10.244.2.2:8080]
  - from: remote
    to: 192.168.7.11:30000
    expect: [10.244.1.2:8080]
    source: 192.168.7.100
  - from: probe-3
    to: 192.168.7.13:30001
    protocol: UDP
    expect: [10.244.1.2:5353, 10.244.2.2:5353]
    source: {10.244.2.2:5353: 10.244.3.3}
  - name: a pod of node-3 to node-local
    from: probe-3
    to: 10.96.0.2:80
    expect: DROP
  - from: node-2
    to: 192.168.7.11:9
    protocol: UDP
    expect: REJECT
`), top, proxy.ModelIPTables)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		name, to, service, expected string
		outcome                     traffic.Outcome
		sticky                      bool
		candidates                  int
	}{
		{"pod probe-1 -> default/sticky ClusterIP 10.96.0.5:80", "ClusterIP 10.96.0.5:80", "default/sticky",
			"one of 10.244.1.2:8080, 10.244.2.2:8080", traffic.Answered, true, 2},
		{"client remote -> default/edge:http NodePort 192.168.7.11:30000 (node-1)", "NodePort 192.168.7.11:30000 (node-1)", "default/edge:http",
			"10.244.1.2:8080 (src 192.168.7.100)", traffic.Answered, false, 2},
		{"pod probe-3 -> default/edge:dns NodePort 192.168.7.13:30001 (node-3)", "NodePort 192.168.7.13:30001 (node-3)", "default/edge:dns",
			"10.244.1.2:5353, 10.244.2.2:5353 (src 10.244.3.3)", traffic.Answered, false, 2},
		{"a pod of node-3 to node-local", "ClusterIP 10.96.0.2:80", "default/node-local:http",
			"no answer (times out)", traffic.Timeout, false, 2},
		{"node node-2 -> 192.168.7.11:9/UDP", "192.168.7.11:9/UDP", "", "refused", traffic.Refused, false, 0},
	} {
		f := plan.Flows[i]
		got := f.Expected
		if f.Name != want.name || f.To != want.to || f.Service != want.service || got.String() != want.expected ||
			got.Outcome != want.outcome || got.Sticky != want.sticky || f.Candidates != want.candidates {
			t.Errorf("flow %d: %q to %q (%s): %s %s sticky %t, %d candidates; want %q to %q (%s): %s %s sticky %t, %d candidates",
				i, f.Name, f.To, f.Service, got.Outcome, got, got.Sticky, f.Candidates,
				want.name, want.to, want.service, want.outcome, want.expected, want.sticky, want.candidates)
		}
		if !strings.HasPrefix(got.Why, "as policies.flows.yaml:") {
			t.Errorf("flow %d: why %q does not point into the file", i, got.Why)
		}
	}
}

// TestBadFlowsFile: every mistake of a flows file is told, with its line and field.
func TestBadFlowsFile(t *testing.T) {
	web := mustLoad(t, "../../topologies/web.yaml")
	want, err := os.ReadFile("testdata/bad.flows.err")
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadFlows("testdata/bad.flows.yaml", web, proxy.ModelIPTables)
	var list topology.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("want a topology.ErrorList, got %v", err)
	}
	if got := err.Error() + "\n"; got != string(want) {
		t.Errorf("errors:\n%s\nwant:\n%s", got, want)
	}
	for _, tc := range []struct{ text, want string }{
		{"", "f.yaml: the file is empty; a flows file needs flows: a list of {from, to, expect}"},
		{"flows: []", "f.yaml:1: flows: want at least one flow"},
		{"flows: 5", "f.yaml:1: flows: want a list, got the number 5"},
		{"flows: [{from: client}]\n---\nflows: []", "f.yaml:2: a flows file holds one YAML document; this starts another"},
	} {
		_, err := ParseFlows("f.yaml", []byte(tc.text), web, proxy.ModelIPTables)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %s", tc.text, err, tc.want)
		}
	}
	if _, err := LoadFlows("testdata/missing.flows.yaml", web, proxy.ModelIPTables); err == nil || !strings.Contains(err.Error(), "missing.flows.yaml") {
		t.Errorf("a missing file: %v", err)
	}
}
