package trace

import (
	"context"
	"net/netip"
	"testing"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	"github.com/svclab/svclab/lab/topology"
)

// The cost of one trace, on the built-in web.yaml in svclab's iptables mode
// (both backends). Run as root, in a private mount namespace on a shared
// machine (see docs/tracing.md):
//
//	go test -run XXX -bench . -benchtime 10x ./lab/trace/
//
// Each iteration traces the client pod's connection to web's ClusterIP: the
// temporary tables, a monitor per namespace, the connection, the conntrack
// entries and routes, and the tables removed again.
func BenchmarkTrace(b *testing.B) {
	if err := namespaces.CheckPrivileges(); err != nil {
		b.Fatal(err)
	}
	web, err := topology.Default()
	if err != nil {
		b.Fatal(err)
	}
	for _, backend := range []string{"nft", "legacy"} {
		b.Run("web-iptables-"+backend, func(b *testing.B) {
			l, err := lab.Up(context.Background(), web, lab.Options{Mode: "iptables", Proxy: proxy.Config{Backend: backend}})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Down()
			tl := FromRecord(l.Record())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t, err := Run(context.Background(), tl, Request{From: "client", To: netip.MustParseAddrPort("10.96.123.45:80")})
				if err != nil {
					b.Fatal(err)
				}
				if t.End.Outcome != Answered {
					b.Fatalf("the trace ended %s", t.End)
				}
			}
		})
	}
}
