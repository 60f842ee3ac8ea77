package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/svclab/svclab/lab"
)

// apiLoadServices is BenchmarkAPILoad's size: 500 by default, upstream's 10000
// with -apiload.services 10000 (some minutes).
var apiLoadServices = flag.Int("apiload.services", 500, "Services (each with one EndpointSlice) BenchmarkAPILoad writes and deletes")

// BenchmarkAPILoad writes Services with 2 endpoints each (one EndpointSlice
// per Service) into a lab's API server and deletes them again, with a few
// request counts under way side by side in one run, and reports the objects
// written per second, and the creations alone: the rate that bounds `svclab
// bench --proxy kube-proxy` at upstream's sizes. As root, with the component
// binary:
//
//	SVCLAB_KUBE_BINARY=... go test -run XXX -bench APILoad -benchtime 1x ./lab/bench [-args -apiload.services 10000]
func BenchmarkAPILoad(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("this benchmark builds a lab of network namespaces and must run as root")
	}
	ctx := context.Background()
	nd, err := upNode(ctx, "b-api"+lab.NewRunID(), 2, proberConfig{}, true, "")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := nd.down(); err != nil {
			b.Error(err)
		}
	}()
	services := *apiLoadServices
	for _, writers := range []int{8, 32, 96} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			w, err := newAPIWriter(ctx, nd.lab.ControlPlane().Client())
			if err != nil {
				b.Fatal(err)
			}
			w.parallel = writers
			st := newState(services, 2, 0, nd.bk)
			var took, creating time.Duration
			var created int64
			for b.Loop() {
				start, before := time.Now(), w.written.Load()
				if err := w.move(ctx, nil, st.current(), time.Time{}); err != nil {
					b.Fatal(err)
				}
				creating += time.Since(start)
				created += w.written.Load() - before
				if err := w.move(ctx, st.current(), nil, time.Time{}); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
			}
			b.ReportMetric(float64(w.written.Load())/took.Seconds(), "objects/s")
			b.ReportMetric(float64(created)/creating.Seconds(), "created/s")
		})
	}
}
