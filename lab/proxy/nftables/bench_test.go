package nftables

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/proxy"
)

// benchRuleset is n ClusterIP Services of two endpoints each in kube-proxy
// 1.37's layout (the parts Read looks at: service-ips and the service chains
// with their numgen DNAT maps), for sizing Read's cost only: the layout itself is
// checked against the hand-written fixture in TestReadFixture.
func benchRuleset(n int) string {
	var b strings.Builder
	b.WriteString("add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n")
	b.WriteString("add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n")
	b.WriteString("add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; }\n")
	b.WriteString("add chain ip kube-proxy services\n")
	b.WriteString("add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips\n")
	for i := range n {
		hi, lo := i>>8, i&0xff
		chain := fmt.Sprintf("service-AAAAAAAA-bench/svc-%05d/tcp/http", i)
		fmt.Fprintf(&b, "add chain ip kube-proxy %s\n", chain)
		fmt.Fprintf(&b, "add element ip kube-proxy service-ips { 10.96.%d.%d . tcp . 80 : goto %s }\n", hi, lo, chain)
		fmt.Fprintf(&b, "add rule ip kube-proxy %s meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.244.%d.%d . 8080 , 1 : 10.245.%d.%d . 8080 }\n",
			chain, hi, lo, hi, lo)
	}
	return b.String()
}

// BenchmarkRead measures one Read of a node holding N Services of two endpoints
// each (what the lab pays per poll); parse-s is the part spent decoding and
// walking nft's JSON, the rest is `nft -j list table`. Run as root:
//
//	go test -run XXX -bench Read ./lab/proxy/nftables/
func BenchmarkRead(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			ns := nstest.New(b, "loads nftables rules")
			file := filepath.Join(b.TempDir(), "rules.nft")
			if err := os.WriteFile(file, []byte(benchRuleset(n)), 0o644); err != nil {
				b.Fatal(err)
			}
			if _, err := ns.Output("nft", "-f", file); err != nil {
				b.Fatal(err)
			}
			var m proxy.ServiceMap
			for b.Loop() {
				var err error
				if m, err = Read(ns, proxy.Config{}); err != nil {
					b.Fatal(err)
				}
			}
			if len(m) != n {
				b.Fatalf("read %d frontends, want %d", len(m), n)
			}
			listing, err := ns.Output("nft", "-j", "list", "table", "ip", Table)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			const parses = 5
			for range parses {
				if _, err := readJSON(listing); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(time.Since(start).Seconds()/parses, "parse-s")
			b.ReportMetric(float64(len(listing)), "json-bytes")
		})
	}
}
