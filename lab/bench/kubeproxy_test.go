package bench_test

import (
	"testing"

	"github.com/svclab/svclab/lab/bench"
	_ "github.com/svclab/svclab/lab/proxy/nftables" // registers mode "nftables"
)

// The real kube-proxy beside svclab's proxier in one small run: kube-proxy in
// nftables and iptables mode (nft backend) follows the Services the bench
// writes into the lab's API server, and reports its syncs and the network
// programming latency of each update from its own metrics, read inside the
// node. The output has the shape of any run's. Timings are never checked. It
// needs the component binary (built on first use, as for every lab with a
// control plane).
func TestKubeProxyRun(t *testing.T) {
	c := rootConfig(t)
	c.Services = []int{20}
	c.Methods, c.Backends = []string{"partial"}, []string{"nft"}
	c.KubeProxyModes = []string{"nftables", "iptables"}
	rep, _, _ := runChecked(t, c)
	for _, s := range []bench.Subject{
		{Mode: "nftables", Method: bench.KubeProxyMethod},
		{Mode: "iptables", Method: bench.KubeProxyMethod, Backend: "nft"},
	} {
		// Each update made kube-proxy sync at least once, and each was
		// stamped with its trigger time: kube-proxy timed its programming.
		for _, ph := range []string{"change", "add"} {
			syncs := get(rep.Rows, s, 20, 2, ph+"_syncs")
			own := get(rep.Rows, s, 20, 2, ph+"_kube_programming")
			if len(syncs) < c.MinReps || len(own) != len(syncs) {
				t.Errorf("%s %s: %d updates, %d network programming latencies kube-proxy recorded", s, ph, len(syncs), len(own))
			}
			for _, n := range syncs {
				if n < 1 {
					t.Errorf("%s %s: an update kube-proxy made no sync for", s, ph)
				}
			}
		}
	}
	// svclab's own proxier ran in the same run, on the same state.
	if len(get(rep.Rows, bench.Subject{Mode: "iptables", Method: "partial", Backend: "nft"}, 20, 2, "add_programming")) == 0 {
		t.Error("svclab's iptables proxier measured nothing beside kube-proxy")
	}
}
