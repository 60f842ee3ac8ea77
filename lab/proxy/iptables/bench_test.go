package iptables

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// manyPorts is n ClusterIP Services with two endpoints each, on two nodes.
func manyPorts(n int) []proxy.ServicePort {
	ports := make([]proxy.ServicePort, n)
	for i := range ports {
		a, b := byte(i>>8), byte(i)
		ports[i] = port("bench", fmt.Sprintf("svc-%05d", i), "http", corev1.ProtocolTCP,
			netip.AddrFrom4([4]byte{10, 96, a, b}).String(), 80,
			proxy.Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, a, b}), Port: 8080, NodeName: "node-1", Ready: true, Serving: true},
			proxy.Endpoint{IP: netip.AddrFrom4([4]byte{10, 245, a, b}), Port: 8080, NodeName: "node-2", Ready: true, Serving: true})
	}
	return ports
}

// BenchmarkSync measures one sync after one Service's endpoint changed, with N
// Services of two endpoints each already installed, for each backend and for a full
// sync (kube-proxy before 1.27), a partial one (kube-proxy's default since) and
// svclab's changed-chains-only one. Run
// as root:
//
//	go test -run XXX -bench Sync -benchtime 5x ./lab/proxy/iptables/
//
// Beside ns/op it reports the parts: write-s (iptables-restore), save-s (iptables-save
// looking for stale chains), setup-s (the jumps ensured with single iptables calls,
// on full syncs), own-s (svclab computing rules and the restore input), and the
// rules written and present.
func BenchmarkSync(b *testing.B) {
	for _, backend := range []string{"nft", "legacy"} {
		for _, n := range []int{1000, 5000} {
			for _, apply := range []string{ApplyFull, ApplyPartial, ApplyChanged} {
				b.Run(fmt.Sprintf("%s/services=%d/%s", backend, n, apply), func(b *testing.B) {
					path := newNodeNS(b)
					p := newProxier(b, path, v137, proxy.Config{Backend: backend, Method: apply})
					ports := manyPorts(n)
					start := time.Now()
					if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
						b.Fatal(err)
					}
					first := time.Since(start)
					var write, save, own, setup time.Duration
					var written, rules int
					i := 0
					for b.Loop() {
						// Move the second endpoint of one Service, as a pod restart does.
						sp := &ports[i%n]
						sp.Endpoints = []proxy.Endpoint{sp.Endpoints[0], sp.Endpoints[1]}
						sp.Endpoints[1].IP = sp.Endpoints[1].IP.Next()
						i++
						if err := p.Sync(context.Background(), proxy.StateOf(ports)); err != nil {
							b.Fatal(err)
						}
						st := p.LastSync()
						write += st.Write
						save += st.Save
						own += st.Generate
						setup += st.Setup
						written += st.RulesWritten
						rules = st.Rules
					}
					ops := float64(i)
					b.ReportMetric(write.Seconds()/ops, "write-s/op")
					b.ReportMetric(save.Seconds()/ops, "save-s/op")
					b.ReportMetric(own.Seconds()/ops, "own-s/op")
					b.ReportMetric(setup.Seconds()/ops, "setup-s/op")
					b.ReportMetric(float64(written)/ops, "rules-written/op")
					b.ReportMetric(float64(rules), "rules")
					b.ReportMetric(first.Seconds(), "first-sync-s")
				})
			}
		}
	}
}

// BenchmarkGenerate measures svclab's own part of a full sync, without root:
// computing kube-proxy's rules for N Services of two endpoints and the
// iptables-restore input that writes them all. It is what the bench's overhead
// ratio puts beside a bare iptables-restore.
//
//	go test -run XXX -bench Generate ./lab/proxy/iptables/
func BenchmarkGenerate(b *testing.B) {
	c := ConfigFor(target(node1, v137))
	all := func(*Table, *Chain) bool { return true }
	for _, n := range []int{1000, 10000} {
		ports := manyPorts(n)
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for b.Loop() {
				rs, err := Generate(c, ports)
				if err != nil {
					b.Fatal(err)
				}
				restoreInput(rs, selectChains(rs, all), nil)
			}
		})
	}
}

// BenchmarkRead measures one Read of a node holding N Services of two endpoints
// each (what the lab pays per poll while it waits for a node to catch up), for
// each backend; parse-s is the part spent parsing and walking iptables-save's
// output, the rest is running iptables-save twice. Run as root:
//
//	go test -run XXX -bench Read ./lab/proxy/iptables/
func BenchmarkRead(b *testing.B) {
	for _, backend := range []string{"nft", "legacy"} {
		for _, n := range []int{1000, 5000} {
			b.Run(fmt.Sprintf("%s/services=%d", backend, n), func(b *testing.B) {
				ns := nstest.New(b, "programs iptables")
				cfg := proxy.Config{Backend: backend}
				p := newProxier(b, ns.Path, v137, cfg)
				if err := p.Sync(context.Background(), proxy.StateOf(manyPorts(n))); err != nil {
					b.Fatal(err)
				}
				var m proxy.ServiceMap
				for b.Loop() {
					var err error
					if m, err = Read(ns, cfg); err != nil {
						b.Fatal(err)
					}
				}
				if len(m) != n {
					b.Fatalf("read %d frontends, want %d", len(m), n)
				}
				save := xtables.Backends[backend].Save
				nat, err := ns.Output(save, "-t", "nat")
				if err != nil {
					b.Fatal(err)
				}
				filter, err := ns.Output(save, "-t", "filter")
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				const parses = 5
				for range parses {
					if _, err := readSaved(nat, filter); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(time.Since(start).Seconds()/parses, "parse-s")
				b.ReportMetric(float64(len(m)), "frontends")
			})
		}
	}
}
