package kube

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkServiceToRules measures kube-proxy in each mode: how long after the API
// server has answered the creation of a Service (selecting a ready pod) the
// node's rules first name its ClusterIP, and how long until its endpoint's DNAT
// is there too (the EndpointSlice controller writes the slice in between, and
// minSyncPeriod spaces kube-proxy's syncs), with kube-proxy's default
// minSyncPeriod (1 s) and with 10 ms. The rules are read by dumping them (nft
// list table, iptables-save) in a loop, so one dump's time (dump-ms) is the
// resolution. Services are created one after another, each on an idle
// kube-proxy (minSyncPeriod and 100 ms after the previous one's rules were in),
// so the first sync is not held back by the one before. It needs root and the component binary;
// run it as go test -run XXX -bench ServiceToRules -benchtime 5x ./lab/kube/.
func BenchmarkServiceToRules(b *testing.B) {
	c := newCluster(b)
	c.addWeb()
	n := 0
	for _, v := range []struct{ mode, backend string }{{"nftables", ""}, {"iptables", "nft"}, {"iptables", "legacy"}} {
		for _, minSync := range []time.Duration{0, 10 * time.Millisecond} {
			period := "default"
			if minSync > 0 {
				period = minSync.String()
			}
			name := strings.TrimSuffix(v.mode+"-"+v.backend, "-") + "/minSyncPeriod=" + period
			b.Run(name, func(b *testing.B) {
				_, ready := startProxy(b, c, v.mode, v.backend, minSync)
				b.ReportMetric(float64(ready.Milliseconds()), "first-sync-ms")
				var toIP, toEndpoint, dumping time.Duration
				dumps := 0
				idle := minSync
				if idle == 0 {
					idle = time.Second // kube-proxy's default minSyncPeriod
				}
				for i := 0; i < b.N; i++ {
					time.Sleep(idle + 100*time.Millisecond)
					n++
					svc := fmt.Sprintf("bench-%d", n)
					ip := newService(b, c, svc)
					start := time.Now()
					seenIP := time.Duration(0)
					for {
						t0 := time.Now()
						rules := proxyRules(b, c.node, v.mode, v.backend)
						dumping += time.Since(t0)
						dumps++
						if seenIP == 0 && mentions(rules, ip) {
							seenIP = time.Since(start)
						}
						if ruleCheck(rules, v.mode, svc, ip) == nil {
							toIP += seenIP
							toEndpoint += time.Since(start)
							break
						}
						if time.Since(start) > 30*time.Second {
							b.Fatalf("%s: no rules for %s after 30s", name, svc)
						}
						time.Sleep(2 * time.Millisecond)
					}
				}
				b.ReportMetric(float64(toIP.Microseconds())/1000/float64(b.N), "clusterip-ms")
				b.ReportMetric(float64(toEndpoint.Microseconds())/1000/float64(b.N), "endpoint-ms")
				// The resolution of both: one dump of the rules (nft or iptables-save).
				b.ReportMetric(float64(dumping.Microseconds())/1000/float64(dumps), "dump-ms")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
