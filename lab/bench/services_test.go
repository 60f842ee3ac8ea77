package bench

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/svclab/svclab/lab/proxy"
)

var testBackends = backends{a: netip.MustParseAddr("10.244.0.3"), b: netip.MustParseAddr("10.244.0.4"), node: "node-1"}

func TestState(t *testing.T) {
	const n, e, probes = 100, 10, 20
	st := newState(n, e, probes, testBackends)
	if len(st.ports) != n || len(st.probes) != probes {
		t.Fatalf("%d Services, %d probes", len(st.ports), len(st.probes))
	}
	ips := map[netip.Addr]bool{}
	for i, sp := range st.ports {
		if ips[sp.ClusterIP] {
			t.Errorf("Service %d: ClusterIP %s used twice", i, sp.ClusterIP)
		}
		ips[sp.ClusterIP] = true
		if len(sp.Endpoints) != e {
			t.Errorf("Service %d: %d endpoints", i, len(sp.Endpoints))
		}
		real := sp.Endpoints[0].IP == testBackends.a
		switch {
		case i == st.first() || i == st.last():
			if !real || sp.Endpoints[0].Port < openPortBase || sp.Endpoints[0].Port >= closedPortBase {
				t.Errorf("data-path Service %d not on the backends' open ports: %v", i, sp.Endpoints[0])
			}
		case slices.Contains(st.probes, i):
			if !real || sp.Endpoints[0].Port < closedPortBase {
				t.Errorf("probe %d not on closed ports: %v", i, sp.Endpoints[0])
			}
		default:
			if real || !netip.MustParsePrefix("10.244.0.0/16").Contains(sp.Endpoints[0].IP) || netip.MustParsePrefix("10.244.0.0/24").Contains(sp.Endpoints[0].IP) {
				t.Errorf("Service %d: synthetic endpoint %v outside the cluster CIDR or on node-1", i, sp.Endpoints[0])
			}
		}
	}
	// Names sort in table order: the first and last Services are first and
	// last in KUBE-SERVICES.
	if !slices.IsSortedFunc(st.ports, func(a, b portLike) int { return cmpName(a, b) }) {
		t.Error("Services are not in name order")
	}

	before := st.current()
	ports, to := st.openProbe(0)
	if &ports[0] == &before[0] {
		t.Error("openProbe changed the slice a proxier was given")
	}
	changed := 0
	for i := range ports {
		if !slices.Equal(ports[i].Endpoints, before[i].Endpoints) {
			changed++
			if to != st.target(i) || ports[i].Endpoints[0].Port != openPortBase {
				t.Errorf("opened Service %d is not the probe reached at %s", i, to)
			}
		}
	}
	if changed != 1 {
		t.Errorf("openProbe changed %d Services", changed)
	}

	ports, to = st.addService()
	ports2, to2 := st.addService()
	if len(ports) != n+1 || len(ports2) != n+2 || to == to2 || ips[to.Addr()] || ips[to2.Addr()] {
		t.Errorf("added Services: %d, %d present; at %s and %s", len(ports), len(ports2), to, to2)
	}
	if last := ports2[len(ports2)-1]; cmpName(ports2[n-1], last) >= 0 || cmpName(ports2[n], last) >= 0 {
		t.Error("added Services do not sort last")
	}
}

func TestStateFewServices(t *testing.T) {
	st := newState(5, 2, 20, testBackends)
	if len(st.probes) != 3 || slices.Contains(st.probes, 0) || slices.Contains(st.probes, 4) {
		t.Errorf("probes %v of 5 Services: want the 3 between the first and the last", st.probes)
	}
	if got := len(servedPorts(10)); got != 5 {
		t.Errorf("10 endpoints on two pods need %d ports each, want 5", got)
	}
}

type portLike = proxy.ServicePort

func cmpName(a, b portLike) int {
	an, bn := a.Name.NamespacedName(), b.Name.NamespacedName()
	switch {
	case an < bn:
		return -1
	case an > bn:
		return 1
	}
	return 0
}
