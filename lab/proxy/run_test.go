package proxy_test

import (
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"
	_ "github.com/svclab/svclab/lab/proxy/nftables"
)

// Every run's label reads back as the same run, and the labels are unique.
func TestRunLabelsRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, kp := range []bool{false, true} {
		for _, r := range proxy.Runs(kp) {
			l := r.Label()
			if seen[l] {
				t.Errorf("label %q given twice", l)
			}
			seen[l] = true
			back, err := proxy.ParseRun(l)
			if err != nil {
				t.Fatalf("ParseRun(%q): %v", l, err)
			}
			if back.Label() != l || back.KubeProxy != kp || back.Variant != r.Variant {
				t.Errorf("ParseRun(%q) = %+v, want %+v", l, back, r)
			}
		}
	}
	for _, want := range []string{"iptables-nft", "iptables-legacy", "ipvs", "kube-proxy-nftables", "kube-proxy-iptables-legacy"} {
		if !seen[want] {
			t.Errorf("no run labelled %q", want)
		}
	}
}

func TestParseRunErrors(t *testing.T) {
	for label, want := range map[string]string{
		"nftables": "list it as kube-proxy-nftables",
		"bogus":    `unknown mode "bogus"`,
	} {
		_, err := proxy.ParseRun(label)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRun(%q) = %v, want an error with %q", label, err, want)
		}
	}
}
