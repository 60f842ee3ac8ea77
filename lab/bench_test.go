package lab

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/internal/meminfo"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// Lab build and teardown speed. Run as root:
//
//	go test -run XXX -bench . -benchtime 3x ./lab/
//
// Each iteration builds the lab, serves every pod, tears it down and waits until no
// namespace of it is left under /run/netns. The cases with a control plane (the
// API server, the controller manager, CoreDNS; issue 20's 1000 pods in < 15 s)
// need the component binary ($SVCLAB_KUBE_BINARY, else built on first use):
// -bench 'UpDown/1000pods' runs the 1000-pod lab without and with one, and
// -bench 'UpDown/10000pods' the 100 nodes of 100 pods each (issue 20: < 60 s),
// with the memory they hold once up: the kernel's (namespaces, devices,
// sockets, rules; machine-wide, see meminfo.Kernel) and this process's (every
// pod's server is a goroutine of it).
func BenchmarkUpDown(b *testing.B) {
	if err := namespaces.CheckPrivileges(); err != nil {
		b.Fatal(err)
	}
	web, err := topology.Default()
	if err != nil {
		b.Fatal(err)
	}
	big, err := topology.Generate(topology.Scale{Name: "big", Nodes: 20, PodsPerNode: 50, Services: 10, Clients: 1})
	if err != nil {
		b.Fatal(err)
	}
	huge, err := topology.Generate(topology.Scale{Name: "huge", Nodes: 100, PodsPerNode: 100, Services: 100, Clients: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		t            *topology.Topology
		mode         string
		controlPlane bool
	}{
		{"web-bare", web, "", false},
		{"web-" + proxy.DefaultMode(), web, proxy.DefaultMode(), false},
		{"1000pods-bare", big, "", false},
		{"1000pods-" + proxy.DefaultMode(), big, proxy.DefaultMode(), false},
		{"1000pods-" + proxy.DefaultMode() + "-control-plane", big, proxy.DefaultMode(), true},
		{"10000pods-100nodes-bare", huge, "", false},
		{"10000pods-100nodes-" + proxy.DefaultMode(), huge, proxy.DefaultMode(), false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var up, down time.Duration
			var kernel, rss int64
			for i := 0; i < b.N; i++ {
				kernelBefore, err := meminfo.Kernel()
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				l, err := Up(context.Background(), tc.t, Options{Mode: tc.mode, ControlPlane: tc.controlPlane})
				if err != nil {
					b.Fatal(err)
				}
				up += time.Since(start)
				for _, p := range l.timings.finish() {
					b.Logf("%s: %d ms", p.Name, p.TookMS)
				}
				kernelUp, kerr := meminfo.Kernel()
				rssUp, rerr := meminfo.ProcessRSS()
				if err := errors.Join(kerr, rerr); err != nil {
					b.Fatal(errors.Join(err, l.Down()))
				}
				kernel += kernelUp - kernelBefore
				// The largest resident size with a lab up: Go may keep an earlier
				// case's heap, so run a case alone for its own figure.
				rss = max(rss, rssUp)
				start = time.Now()
				if err := l.Down(); err != nil {
					b.Fatal(err)
				}
				if left, _ := namespaces.List(record.NamespacePrefix + tc.t.Name + "-"); len(left) > 0 {
					b.Fatalf("%d namespaces left after down", len(left))
				}
				down += time.Since(start)
			}
			pods := float64(len(tc.t.Pods) * b.N)
			b.ReportMetric(up.Seconds()/float64(b.N), "up-s")
			b.ReportMetric(down.Seconds()/float64(b.N), "down-s")
			b.ReportMetric(float64(kernel)/float64(b.N)/(1<<20), "kernel-MiB")
			b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
			if pods > 0 {
				b.ReportMetric(pods/up.Seconds(), "pods/s")
			}
		})
	}
}
