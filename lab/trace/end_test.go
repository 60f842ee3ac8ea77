package trace

import (
	"errors"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/traffic"
)

// A refusal no rule names is IPVS's own when a node met a virtual service
// without real servers there (a node's connection meets IPVS before filter
// OUTPUT), else the destination's: no listener.
func TestEndOfRefusal(t *testing.T) {
	refused := errors.New("connect: connection refused")
	ipvs := &Trace{Hops: []Hop{{Member: "node-1", Kind: "node", IPVSEmpty: "TCP 1.2.3.6:80 rr"}}}
	e := endOf(ipvs, traffic.Refused, traffic.Reply{}, refused)
	if e.Outcome != Refused || e.Member != "node-1" || !strings.HasPrefix(e.By, "IPVS: virtual service TCP 1.2.3.6:80 rr has no real server") {
		t.Errorf("IPVS refusal: got %+v", e)
	}
	plain := &Trace{Hops: []Hop{{Member: "node-1", Kind: "node"}, {Member: "web-a", Kind: "pod"}}}
	e = endOf(plain, traffic.Refused, traffic.Reply{}, refused)
	if e.Outcome != Refused || e.Member != "web-a" || !strings.HasPrefix(e.By, "no listener") {
		t.Errorf("refusal by the destination: got %+v", e)
	}
}
