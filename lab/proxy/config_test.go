package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/version"
)

// TestValidate holds which configurations svclab's proxiers take, and that a
// refusal names the field and why.
func TestValidate(t *testing.T) {
	off, max := false, int32(65536)
	zero := int32(0)
	v118 := version.Version{Major: 1, Minor: 18}
	cases := []struct {
		name    string
		k       kubeproxyconfig.KubeProxyConfiguration
		v       version.Version
		section string
		want    string // "" accepted, else a part of the error
	}{
		{"defaults", kubeproxyconfig.KubeProxyConfiguration{}, version.Version{}, SectionIPTables, ""},
		{"no clusterCIDR", kubeproxyconfig.KubeProxyConfiguration{ClusterCIDR: ""}, version.Version{}, SectionIPVS, ""},
		{"NodeCIDR", kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: LocalModeNodeCIDR}, version.Version{}, SectionIPTables, ""},
		{"BridgeInterface", kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: LocalModeBridgeInterface,
			DetectLocal: kubeproxyconfig.DetectLocalConfiguration{BridgeInterface: "cni0"}}, version.Version{}, SectionIPTables, ""},
		{"BridgeInterface without its name", kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: LocalModeBridgeInterface},
			version.Version{}, SectionIPTables, "detectLocal.bridgeInterface: must be set"},
		{"InterfaceNamePrefix without its prefix", kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: LocalModeInterfaceNamePrefix},
			version.Version{}, SectionIPTables, "detectLocal.interfaceNamePrefix: must be set"},
		{"unknown mode", kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: "Pods"}, version.Version{}, SectionIPTables, `detectLocalMode "Pods": want`},
		{"NodeCIDR in IPVS", kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: LocalModeNodeCIDR}, version.Version{}, SectionIPVS, "in ipvs mode"},
		{"NodeCIDR in 1.18", kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: LocalModeNodeCIDR}, v118, SectionIPTables, "for kube-proxy 1.18"},
		{"localhostNodePorts false", kubeproxyconfig.KubeProxyConfiguration{IPTables: kubeproxyconfig.KubeProxyIPTablesConfiguration{LocalhostNodePorts: &off}},
			version.Version{}, SectionIPTables, ""},
		{"localhostNodePorts false in 1.18", kubeproxyconfig.KubeProxyConfiguration{IPTables: kubeproxyconfig.KubeProxyIPTablesConfiguration{LocalhostNodePorts: &off}},
			v118, SectionIPTables, "iptables.localhostNodePorts false"},
		{"maxPerCore 0", kubeproxyconfig.KubeProxyConfiguration{Conntrack: kubeproxyconfig.KubeProxyConntrackConfiguration{MaxPerCore: &zero}},
			version.Version{}, SectionIPTables, ""},
		{"maxPerCore", kubeproxyconfig.KubeProxyConfiguration{Conntrack: kubeproxyconfig.KubeProxyConntrackConfiguration{MaxPerCore: &max}},
			version.Version{}, SectionIPTables, "conntrack.maxPerCore: 65536: kube-proxy would raise nf_conntrack_max"},
		{"nodePortAddresses", kubeproxyconfig.KubeProxyConfiguration{NodePortAddresses: []string{"primary"}},
			version.Version{}, SectionIPTables, "nodePortAddresses: svclab's own proxiers do not reproduce it"},
	}
	for _, c := range cases {
		k := c.k
		if c.name != "no clusterCIDR" {
			k.ClusterCIDR = "10.244.0.0/16"
		}
		err := Config{KubeProxy: k, Version: c.v}.Validate(c.section)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestLocalDetector holds each detectLocalMode to the matches kube-proxy 1.37's
// detectors write, and the cases with none.
func TestLocalDetector(t *testing.T) {
	n := Node{Name: "node-1", PodCIDR: netip.MustParsePrefix("10.244.1.0/24")}
	cases := []struct {
		mode, cidr, bridge, prefix string
		node                       Node
		ifLocal                    []string
	}{
		{"", "10.244.0.0/16", "", "", n, []string{"-s", "10.244.0.0/16"}},
		{LocalModeClusterCIDR, "", "", "", n, nil},
		{LocalModeNodeCIDR, "10.244.0.0/16", "", "", n, []string{"-s", "10.244.1.0/24"}},
		{LocalModeNodeCIDR, "10.244.0.0/16", "", "", Node{Name: "bare"}, nil},
		{LocalModeBridgeInterface, "", "cni0", "", n, []string{"-i", "cni0"}},
		{LocalModeInterfaceNamePrefix, "", "", "veth", n, []string{"-i", "veth+"}},
	}
	for _, c := range cases {
		var k kubeproxyconfig.KubeProxyConfiguration
		k.ClusterCIDR, k.DetectLocalMode = c.cidr, kubeproxyconfig.LocalMode(c.mode)
		k.DetectLocal.BridgeInterface, k.DetectLocal.InterfaceNamePrefix = c.bridge, c.prefix
		d := Config{KubeProxy: k}.LocalDetector(c.node)
		if !slices.Equal(d.IfLocal(), c.ifLocal) || d.Implemented() != (c.ifLocal != nil) {
			t.Errorf("%q on %s: IfLocal %q, want %q", c.mode, c.node.Name, d.IfLocal(), c.ifLocal)
		}
		if c.ifLocal != nil && !slices.Equal(d.IfNotLocal(), append([]string{"!"}, c.ifLocal...)) {
			t.Errorf("%q: IfNotLocal %q", c.mode, d.IfNotLocal())
		}
	}
}

// TestConntrackSysctls holds the sysctls to kube-proxy's defaults (a day, an
// hour) and to what a configuration sets, 0 leaving a timeout alone.
func TestConntrackSysctls(t *testing.T) {
	got := Config{}.ConntrackSysctls()
	want := [][2]string{{"net.netfilter.nf_conntrack_tcp_timeout_established", "86400"}, {"net.netfilter.nf_conntrack_tcp_timeout_close_wait", "3600"}}
	if !slices.Equal(got, want) {
		t.Errorf("defaults: %q, want %q", got, want)
	}
	var c Config
	ct := &c.KubeProxy.Conntrack
	ct.TCPEstablishedTimeout = &metav1.Duration{}
	ct.TCPCloseWaitTimeout = &metav1.Duration{Duration: 90 * time.Second}
	ct.TCPBeLiberal = true
	ct.UDPTimeout.Duration, ct.UDPStreamTimeout.Duration = 10*time.Second, 2*time.Minute
	got = c.ConntrackSysctls()
	want = [][2]string{{"net.netfilter.nf_conntrack_tcp_timeout_close_wait", "90"}, {"net.netfilter.nf_conntrack_tcp_be_liberal", "1"},
		{"net.netfilter.nf_conntrack_udp_timeout", "10"}, {"net.netfilter.nf_conntrack_udp_timeout_stream", "120"}}
	if !slices.Equal(got, want) {
		t.Errorf("set: %q, want %q", got, want)
	}
}
