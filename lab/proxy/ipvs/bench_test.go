package ipvs

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// newNodeNS creates a throwaway network namespace (see nstest.New) and returns its
// path. It needs root and a kernel with IPVS: run it in svclab's VM,
//
//	scripts/vm/run.sh --test ./lab/proxy/ipvs/ -- -test.run '^$' -test.bench .
func newNodeNS(tb testing.TB) string {
	tb.Helper()
	if err := Available(); err != nil {
		tb.Fatal(err)
	}
	name := nstest.New(tb, "programs IPVS").Name
	return namespaces.Path(name)
}

// clusterIPServices are n ClusterIP Services of two endpoints each.
func clusterIPServices(n int) []proxy.ServicePort {
	ports := make([]proxy.ServicePort, n)
	for i := range ports {
		ports[i] = port(fmt.Sprintf("svc-%d", i), corev1.ProtocolTCP,
			netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String(), 80,
			ep(netip.AddrFrom4([4]byte{10, 244, 1, byte(i)}).String(), 8080, "node-1"),
			ep(netip.AddrFrom4([4]byte{10, 244, 2, byte(i)}).String(), 8080, "node-2"))
	}
	return ports
}

// BenchmarkSync measures a sync after one endpoint of one Service changed, with n
// Services present, and reports the cold (first) sync and the work of each sync.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			t := target(node1)
			t.NetNS, t.RunDir = newNodeNS(b), b.TempDir()
			p, err := New(t)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ports := clusterIPServices(n)
			if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
				b.Fatal(err)
			}
			cold := p.LastSync()
			full := ports[0].Endpoints
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ports[0].Endpoints = full[:1+i%2]
				if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
					b.Fatal(err)
				}
			}
			st := p.LastSync()
			b.ReportMetric(float64(cold.Total.Milliseconds()), "cold-ms")
			b.ReportMetric(float64(cold.NetlinkCalls), "cold-netlink")
			b.ReportMetric(float64(st.NetlinkCalls), "netlink/sync")
			b.ReportMetric(float64(st.Commands), "iptables-programs/sync")
			b.ReportMetric(float64(st.IPTables.Microseconds())/1000, "iptables-ms/sync")
		})
	}
}

// BenchmarkRead measures one Read of a node holding N ClusterIP Services of two
// endpoints each: a virtual server dump, then a real server dump per virtual
// server. In svclab's VM:
//
//	scripts/vm/run.sh --test ./lab/proxy/ipvs/ -- -test.run '^$' -test.bench Read
func BenchmarkRead(b *testing.B) {
	for _, n := range []int{1000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			t := target(node1)
			t.NetNS, t.RunDir = newNodeNS(b), b.TempDir()
			p, err := New(t)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if err := p.Sync(context.Background(), proxy.StateOf(clusterIPServices(n))); err != nil {
				b.Fatal(err)
			}
			ns, err := namespaces.OpenPath(t.NetNS)
			if err != nil {
				b.Fatal(err)
			}
			defer ns.Close()
			var m proxy.ServiceMap
			for b.Loop() {
				if m, err = Read(ns, t.Config); err != nil {
					b.Fatal(err)
				}
			}
			if len(m) != n {
				b.Fatalf("read %d frontends, want %d", len(m), n)
			}
		})
	}
}
