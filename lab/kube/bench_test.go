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
// minSyncPeriod (1 s) and with 10 ms. It needs root and the component binary;
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
				var toIP, toEndpoint time.Duration
				for i := 0; i < b.N; i++ {
					n++
					svc := fmt.Sprintf("bench-%d", n)
					ip := newService(b, c, svc)
					start := time.Now()
					seenIP := time.Duration(0)
					for {
						rules := proxyRules(b, c.node, v.mode, v.backend)
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
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
