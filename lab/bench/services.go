package bench

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxy"
)

// Ports the backend pods serve and the ports nothing listens on. An endpoint on a
// closed port of a live pod answers a SYN with a reset at once, so a Service
// pointing there is refused quickly rather than left hanging; moving its
// endpoints to open ports is the endpoint change whose arrival the prober sees.
const (
	openPortBase   = 8080
	closedPortBase = 9000
	servicePort    = 80
)

// MaxEndpoints bounds E: the two backend pods serve E/2 ports each.
const MaxEndpoints = 200

// serviceNamespace is the namespace of every synthetic Service.
const serviceNamespace = "bench"

// backends are the two pods the data-path Services and the probed Services point
// at.
type backends struct {
	a, b netip.Addr
	node string
}

// realEndpoints are e endpoints alternating between the two backend pods, on open
// ports or on closed ones.
func (bk backends) realEndpoints(e int, open bool) []proxy.Endpoint {
	base := openPortBase
	if !open {
		base = closedPortBase
	}
	eps := make([]proxy.Endpoint, e)
	for i := range eps {
		ip := bk.a
		if i%2 == 1 {
			ip = bk.b
		}
		eps[i] = proxy.Endpoint{IP: ip, Port: base + i/2, NodeName: bk.node, Ready: true, Serving: true}
	}
	return eps
}

// servedPorts are the ports each backend pod must serve for e endpoints.
func servedPorts(e int) []corev1.ContainerPort {
	ports := make([]corev1.ContainerPort, (e+1)/2)
	for i := range ports {
		ports[i] = corev1.ContainerPort{Name: fmt.Sprintf("p%d", i), ContainerPort: int32(openPortBase + i), Protocol: corev1.ProtocolTCP}
	}
	return ports
}

// state is the synthetic Service state one proxier is driven through: n
// ClusterIP Services of e endpoints each, then the updates. The first and the
// last Service in kube-proxy's order (and svclab's, which sorts by name) have
// endpoints on the real backend pods, for the data path; a run of Services in
// the middle are probes for endpoint changes and start on closed ports; every
// other endpoint is an address in the cluster CIDR on a node that does not
// exist, which costs rules exactly as a real one does.
//
// Updates are never undone: each endpoint change opens another probe, and each
// added Service stays, so a repetition costs one sync. The k-th added Service
// is added with n+k present.
type state struct {
	n, e   int
	ports  []proxy.ServicePort
	bk     backends
	probes []int
	added  int
}

// Address blocks inside the lab's 10.96.0.0/12 service CIDR and 10.244.0.0/16
// cluster CIDR. Synthetic endpoints start at 10.244.1.0, clear of node-1's
// 10.244.0.0/24 where the real pods live; with more endpoints than the /16 holds
// they wrap around (an address may then back several Services, as a pod with
// several ports does; rule text stays distinct because chain names hash the
// Service name).
var (
	clusterIPBase  = netip.MustParseAddr("10.96.0.16")
	addedIPBase    = netip.MustParseAddr("10.104.0.16")
	syntheticFirst = netip.MustParseAddr("10.244.1.0")
)

const syntheticAddrs = 65536 - 256

// newState is the base state, with up to probes probe Services (as many as fit
// between the first and the last).
func newState(n, e, probes int, bk backends) *state {
	s := &state{n: n, e: e, bk: bk, ports: make([]proxy.ServicePort, n)}
	probes = min(probes, n-2)
	lo := max(1, n/2-probes/2)
	for i := 0; i < probes; i++ {
		s.probes = append(s.probes, lo+i)
	}
	isProbe := map[int]bool{}
	for _, i := range s.probes {
		isProbe[i] = true
	}
	ep := 0
	for i := range s.ports {
		sp := proxy.ServicePort{
			Name:      proxy.ServicePortName{Namespace: serviceNamespace, Name: fmt.Sprintf("svc-%05d", i), Port: "http"},
			Protocol:  corev1.ProtocolTCP,
			ClusterIP: addrAdd(clusterIPBase, i),
			Port:      servicePort,
		}
		switch {
		case i == s.first(), i == s.last():
			sp.Endpoints = bk.realEndpoints(e, true)
		case isProbe[i]:
			sp.Endpoints = bk.realEndpoints(e, false)
		default:
			sp.Endpoints = make([]proxy.Endpoint, e)
			for j := range sp.Endpoints {
				sp.Endpoints[j] = proxy.Endpoint{
					IP: addrAdd(syntheticFirst, ep%syntheticAddrs), Port: openPortBase,
					NodeName: fmt.Sprintf("node-%d", 2+ep%100), Ready: true, Serving: true,
				}
				ep++
			}
		}
		s.ports[i] = sp
	}
	return s
}

func (s *state) first() int { return 0 }
func (s *state) last() int  { return s.n - 1 }

// target is where a client reaches Service i.
func (s *state) target(i int) netip.AddrPort {
	return netip.AddrPortFrom(s.ports[i].ClusterIP, servicePort)
}

// current is the state as it stands, for a sync.
func (s *state) current() []proxy.ServicePort { return s.ports }

// clone is a copy of s that can be updated without changing s (the slices
// are shared, and each update makes new ones).
func (s *state) clone() *state {
	c := *s
	return &c
}

// next makes repetition rep of ph: the new state and where the changed Service
// is reached.
func (s *state) next(ph phase, rep int) ([]proxy.ServicePort, netip.AddrPort) {
	if ph == phaseAdd {
		return s.addService()
	}
	return s.openProbe(rep)
}

// openProbe moves probe k's endpoints from closed ports to open ones, the only
// change from the current state, and returns the new state and where the probe
// is reached. A new slice is made so the state a proxier was given is never
// changed under it.
func (s *state) openProbe(k int) ([]proxy.ServicePort, netip.AddrPort) {
	i := s.probes[k]
	ports := make([]proxy.ServicePort, len(s.ports))
	copy(ports, s.ports)
	ports[i].Endpoints = s.bk.realEndpoints(s.e, true)
	s.ports = ports
	return ports, s.target(i)
}

// addService adds one Service backed by the real pods, of its own name and
// address: a client's source ports for one destination cycle through the
// ephemeral range, and a fresh destination keeps a port from meeting the
// conntrack entry of an unanswered SYN an earlier repetition sent there, which
// would carry it past the new rules.
func (s *state) addService() ([]proxy.ServicePort, netip.AddrPort) {
	sp := proxy.ServicePort{
		// "svc-z" sorts after every "svc-NNNNN": the new Service comes last in
		// KUBE-SERVICES, as an appended rule would.
		Name:      proxy.ServicePortName{Namespace: serviceNamespace, Name: fmt.Sprintf("svc-zadd-%04d", s.added), Port: "http"},
		Protocol:  corev1.ProtocolTCP,
		ClusterIP: addrAdd(addedIPBase, s.added),
		Port:      servicePort,
		Endpoints: s.bk.realEndpoints(s.e, true),
	}
	s.added++
	ports := make([]proxy.ServicePort, len(s.ports), len(s.ports)+1)
	copy(ports, s.ports)
	s.ports = append(ports, sp)
	return s.ports, netip.AddrPortFrom(sp.ClusterIP, servicePort)
}

func addrAdd(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
