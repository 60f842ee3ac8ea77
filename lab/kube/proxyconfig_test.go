package kube

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite testdata/proxyconfig/bad/*.err from what ReadProxyFragment reports")

// TestBadProxyFragments holds every bad fragment's exact error: file, line, field
// path and what is wrong.
func TestBadProxyFragments(t *testing.T) {
	files, err := filepath.Glob("testdata/proxyconfig/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad fragments (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := ReadProxyFragment(f)
			if err == nil {
				t.Fatalf("ReadProxyFragment(%s) accepted it", f)
			}
			golden := strings.TrimSuffix(f, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("%v (run with -update to write it)", rerr)
			}
			if got := err.Error() + "\n"; got != string(want) {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func testProxyConfig() ProxyConfig {
	return ProxyConfig{
		Mode:        "nftables",
		ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		NodeName:    "node-1",
		NodeIP:      netip.MustParseAddr("192.168.1.10"),
		Kubeconfig:  "/run/svclab/lab/kubeconfig",
	}
}

func TestProxyConfigDefaults(t *testing.T) {
	got := decodeYAML(t, mustProxyConfig(t, testProxyConfig()))
	want := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"mode":               "nftables",
		"clusterCIDR":        "10.244.0.0/16",
		"hostnameOverride":   "node-1",
		"clientConnection":   map[string]any{"kubeconfig": "/run/svclab/lab/kubeconfig"},
		"healthzBindAddress": "192.168.1.10:10256",
		"metricsBindAddress": "192.168.1.10:10249",
		"conntrack":          map[string]any{"maxPerCore": 0},
		"nftables":           map[string]any{},
	}
	assertYAMLEqual(t, got, want)

	c := testProxyConfig()
	c.Mode = "iptables"
	c.MinSyncPeriod = 10 * time.Millisecond
	got = decodeYAML(t, mustProxyConfig(t, c))
	if v, _ := lookup(got, "iptables.minSyncPeriod"); v != "10ms" {
		t.Errorf("iptables.minSyncPeriod = %v, want 10ms", v)
	}
	if _, set := got["nftables"]; set {
		t.Errorf("an iptables configuration has an nftables section")
	}
	c.Mode = "userspace"
	if _, err := ProxyConfigYAML(c); err == nil || !strings.Contains(err.Error(), `mode "userspace"`) {
		t.Errorf("mode userspace: %v, want an error naming it", err)
	}
}

func TestProxyFragmentMerge(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kp.yaml")
	fragment := `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
conntrack:
  min: 1000
  tcpBeLiberal: true
nftables:
  minSyncPeriod: 5s
metricsBindAddress: null
nodePortAddresses: [primary]
featureGates:
  SomeGate: true
`
	if err := os.WriteFile(file, []byte(fragment), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadProxyFragment(file)
	if err != nil {
		t.Fatal(err)
	}
	c := testProxyConfig()
	c.MinSyncPeriod = time.Second
	c.Fragment = f
	got := decodeYAML(t, mustProxyConfig(t, c))
	for path, want := range map[string]any{
		"conntrack.maxPerCore":   0, // the lab's, kept beside the fragment's own conntrack fields
		"conntrack.min":          1000,
		"conntrack.tcpBeLiberal": true,
		"nftables.minSyncPeriod": "5s", // the fragment's wins
		"featureGates.SomeGate":  true,
		"hostnameOverride":       "node-1",
	} {
		if v, ok := lookup(got, path); !ok || v != want {
			t.Errorf("%s = %v (set %v), want %v", path, v, ok, want)
		}
	}
	if _, set := got["metricsBindAddress"]; set {
		t.Errorf("metricsBindAddress: null in the fragment did not remove it")
	}
	if v, _ := got["nodePortAddresses"].([]any); len(v) != 1 || v[0] != "primary" {
		t.Errorf("nodePortAddresses = %v, want [primary]", got["nodePortAddresses"])
	}

	// A fragment replacing a lab map by a scalar makes a configuration kube-proxy
	// refuses, and the error says so.
	bad, err := parseProxyFragment("kp.yaml", []byte("conntrack: 5\n"))
	if err == nil {
		c.Fragment = bad
		_, err = ProxyConfigYAML(c)
	}
	if err == nil || !strings.Contains(err.Error(), "conntrack") {
		t.Errorf("conntrack: 5 gave %v, want an error naming conntrack", err)
	}
}

func TestMerge(t *testing.T) {
	dst := map[string]any{"a": map[string]any{"b": 1, "c": 2}, "d": []any{1}, "e": "x"}
	merge(dst, map[string]any{"a": map[string]any{"c": nil, "f": map[string]any{"g": nil, "h": 3}}, "d": []any{2, 3}, "e": nil})
	want := map[string]any{"a": map[string]any{"b": 1, "f": map[string]any{"h": 3}}, "d": []any{2, 3}}
	assertYAMLEqual(t, dst, want)
}

func TestLineOf(t *testing.T) {
	var doc yaml.Node
	src := "a:\n  b:\n    - x\n    - c: 1\nd: 2\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"a": 1, "a.b": 2, "a.b[0]": 3, "a.b[1].c": 4, "d": 5, "a.x": 1, "a.b[7]": 2, "zz": 0} {
		if got := lineOf(doc.Content[0], path); got != want {
			t.Errorf("lineOf(%s) = %d, want %d", path, got, want)
		}
	}
}

func mustProxyConfig(t *testing.T, c ProxyConfig) []byte {
	t.Helper()
	b, err := ProxyConfigYAML(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeYAML(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return m
}

func assertYAMLEqual(t *testing.T, got, want map[string]any) {
	t.Helper()
	g, _ := yaml.Marshal(got)
	w, _ := yaml.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("got:\n%s\nwant:\n%s", g, w)
	}
}

// TestFragmentClusterCIDR: clusterCIDR and the local-traffic detector are the
// user's: an empty clusterCIDR (kube-proxy without a ClusterCIDR detector) and
// detectLocalMode NodeCIDR reach kube-proxy's file over the topology's range,
// and Sets says the fragment names clusterCIDR, so the lab does not fill it in.
func TestFragmentClusterCIDR(t *testing.T) {
	f, err := parseProxyFragment("kp.yaml", []byte("clusterCIDR: \"\"\ndetectLocalMode: NodeCIDR\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Sets("clusterCIDR") || f.Sets("nodePortAddresses") {
		t.Errorf("Sets: clusterCIDR %t, nodePortAddresses %t", f.Sets("clusterCIDR"), f.Sets("nodePortAddresses"))
	}
	c := testProxyConfig()
	c.Fragment = f
	got := decodeYAML(t, mustProxyConfig(t, c))
	if got["clusterCIDR"] != "" || got["detectLocalMode"] != "NodeCIDR" {
		t.Errorf("clusterCIDR %q, detectLocalMode %v", got["clusterCIDR"], got["detectLocalMode"])
	}
	var nilFragment *ProxyFragment
	if nilFragment.Sets("clusterCIDR") {
		t.Error("no fragment sets clusterCIDR")
	}
}
