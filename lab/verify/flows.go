package verify

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/version"
)

// A flows file pins flows a user writes, in the spirit of the packet-flow tables of
// kube-proxy's own tests (source, destination, the endpoints it may reach or
// REJECT or DROP, masqueraded or not):
//
//	flows:
//	  - name: a pod reaches both backends with its own address   # optional
//	    from: client               # a node, pod or client of the topology
//	    to: 10.96.123.45:80        # any address:port
//	    protocol: TCP              # TCP (default) or UDP
//	    expect: [10.244.1.10:8080, 10.244.2.10:8080]   # or REJECT, or DROP
//	    source: 10.244.1.5         # optional: the address every backend sees,
//	                               # or a mapping backend -> address
//
// A list of backends means every connection is answered by one of them and each
// answers at least once (to a Service with ClientIP affinity: every connection by
// the same one); REJECT that the connection is refused; DROP that nothing answers.

// flowsFile is a flows file as written.
type flowsFile struct {
	Flows []flowEntry `json:"flows"`
}

type flowEntry struct {
	Name     string `json:"name"`
	From     string `json:"from"`
	To       string `json:"to"`
	Protocol string `json:"protocol"`
	// Expect is a list of backends ("ip:port"), or REJECT or DROP.
	Expect any `json:"expect"`
	// Source is the address every backend must see, or a mapping from backend to
	// the address it must see.
	Source any `json:"source"`
}

// Keywords of expect.
const (
	expectReject = "REJECT"
	expectDrop   = "DROP"
)

// LoadFlows reads the flows file at path as a plan for topology t, run under
// model m. A file with mistakes gives a topology.ErrorList naming each.
func LoadFlows(path string, t *topology.Topology, m proxy.Model) (Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Plan{}, fmt.Errorf("flows: %w", err)
	}
	return ParseFlows(path, data, t, m)
}

// ParseFlows does what LoadFlows does for data read from source, the name errors
// give.
func ParseFlows(source string, data []byte, t *topology.Topology, m proxy.Model) (Plan, error) {
	var f flowsFile
	pos, errs, ok := topology.DecodeYAML(source, data, &f, "a flows file",
		"the file is empty; a flows file needs flows: a list of {from, to, expect}")
	if !ok {
		return Plan{}, errs.Err()
	}
	r := &flowsReader{source: source, pos: pos, errs: errs, members: map[string]Source{}, names: map[string]string{},
		ports: proxy.FromObjects(t.Services, t.EndpointSlices()), nodes: t.Nodes}
	for _, s := range sourcesOf(t) {
		r.members[s.Name] = s
	}
	if len(f.Flows) == 0 {
		r.errorAt("flows", "want at least one flow")
	}
	plan := Plan{Model: m}
	for i, e := range f.Flows {
		if fl, ok := r.flow(fmt.Sprintf("flows[%d]", i), e, t.Source); ok {
			plan.Flows = append(plan.Flows, fl)
		}
	}
	if err := r.errs.Err(); err != nil {
		return Plan{}, err
	}
	return plan, nil
}

// flowsReader turns entries of a flows file into flows, collecting every mistake.
type flowsReader struct {
	source  string
	pos     topology.Positions
	errs    topology.ErrorList
	members map[string]Source
	// names maps each name given to the path of the flow that gave it first.
	names map[string]string
	ports []proxy.ServicePort
	nodes []topology.Node
}

func (r *flowsReader) errorAt(path, format string, args ...any) {
	r.errs = append(r.errs, topology.Error{Source: r.source, Line: r.pos.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// flow reads the entry at path; ok is false when it has mistakes, each reported.
func (r *flowsReader) flow(path string, e flowEntry, topo string) (Flow, bool) {
	start := len(r.errs)
	src, known := r.members[e.From]
	switch {
	case e.From == "":
		r.errorAt(path+".from", "required: the node, pod or client the flow starts from")
	case !known:
		r.errorAt(path+".from", "%s has no node, pod or client called %q", topo, e.From)
	}
	to, toOK := r.address(path+".to", e.To)
	protocol := e.Protocol
	switch protocol {
	case "":
		protocol = "TCP"
	case "TCP", "UDP":
	default:
		r.errorAt(path+".protocol", "want TCP or UDP, got %q", protocol)
	}
	exp, backends := r.expectation(path, e)
	if e.Name != "" {
		if first, dup := r.names[e.Name]; dup {
			r.errorAt(path+".name", "duplicate name (first given on line %d)", r.pos.Line(first+".name"))
		} else {
			r.names[e.Name] = path
		}
	}
	if len(r.errs) > start || !toOK {
		return Flow{}, false
	}

	tgt := Target{Addr: to}
	for _, n := range r.nodes {
		if n.IP == to.Addr() {
			tgt.Node = n.Name
		}
	}
	for _, sp := range r.ports {
		switch {
		case slices.Contains(sp.LoadBalancerIPs, to.Addr()):
			tgt.External = LoadBalancer
		case slices.Contains(sp.ExternalIPs, to.Addr()):
			tgt.External = ExternalIP
		}
	}
	f := Flow{Name: e.Name, Source: src, Target: tgt, To: to.String() + "/" + protocol, Protocol: protocol, Candidates: backends, Expected: exp}
	if sp, ok := r.servicePort(tgt, protocol); ok {
		// Dialling a Service, the rules may pick any of its endpoints, so the
		// attempts must be enough to catch one the file leaves out.
		f.Service = sp.Name.String(version.Default)
		f.To = tgt.String()
		f.Candidates = max(backends, len(sp.Endpoints))
		if tgt.External != "" {
			// Through a load balancer or a multipath route, a flow may enter at
			// any node, each picking among its own endpoints: no backend is
			// reached less often than one in nodes x endpoints.
			f.Candidates = max(backends, len(r.nodes)*len(sp.Endpoints))
		}
		f.Expected.Sticky = exp.Outcome == traffic.Answered && sp.AffinitySeconds > 0
	}
	if f.Name == "" {
		// Named as Derive names its flows; an address no Service holds carries its
		// protocol in To.
		f.Name = fmt.Sprintf("%s %s -> %s", src.Kind, src.Name, f.To)
		if f.Service != "" {
			f.Name = fmt.Sprintf("%s %s -> %s %s", src.Kind, src.Name, f.Service, f.To)
		}
	}
	f.Expected.Why = fmt.Sprintf("as %s:%d says", r.source, r.pos.Line(path))
	return f, true
}

// address reads an IPv4 address:port.
func (r *flowsReader) address(path, s string) (netip.AddrPort, bool) {
	if s == "" {
		r.errorAt(path, "required: the address:port the flow dials")
		return netip.AddrPort{}, false
	}
	a, err := netip.ParseAddrPort(s)
	switch {
	case err != nil || !a.Addr().Is4():
		r.errorAt(path, "want an IPv4 address:port such as 10.96.0.10:80, got %q", s)
	case a.Port() == 0:
		r.errorAt(path, "port 0 cannot be dialled")
	default:
		return a, true
	}
	return netip.AddrPort{}, false
}

// expectation reads expect and source; backends is how many expect lists.
func (r *flowsReader) expectation(path string, e flowEntry) (exp Expectation, backends int) {
	switch v := e.Expect.(type) {
	case nil:
		r.errorAt(path+".expect", "required: a list of backends (address:port), %s or %s", expectReject, expectDrop)
		return exp, 0
	case string:
		switch v {
		case expectReject:
			exp.Outcome = traffic.Refused
		case expectDrop:
			exp.Outcome = traffic.Timeout
		default:
			r.errorAt(path+".expect", "want a list of backends (address:port), %s or %s, got %q", expectReject, expectDrop, v)
			return exp, 0
		}
		if e.Source != nil {
			r.errorAt(path+".source", "a flow that expects %s has no source; leave it out", v)
		}
		return exp, 0
	case []any:
		if len(v) == 0 {
			r.errorAt(path+".expect", "want at least one backend; a flow nothing answers expects %s or %s", expectReject, expectDrop)
			return exp, 0
		}
		exp = Expectation{Outcome: traffic.Answered, Backends: map[string][]netip.Addr{}}
		for j, item := range v {
			p := fmt.Sprintf("%s.expect[%d]", path, j)
			s, _ := item.(string)
			b, err := netip.ParseAddrPort(s)
			switch {
			case err != nil || !b.Addr().Is4() || b.Port() == 0:
				r.errorAt(p, "want a backend IPv4 address:port such as 10.244.1.10:8080, got %s", describeValue(item))
			case listed(exp.Backends, b.String()):
				r.errorAt(p, "%s is listed twice", b)
			default:
				exp.Backends[b.String()] = []netip.Addr{}
			}
		}
		r.sources(path+".source", e.Source, exp.Backends)
		return exp, len(v)
	}
	r.errorAt(path+".expect", "want a list of backends (address:port), %s or %s, got %s", expectReject, expectDrop, describeValue(e.Expect))
	return exp, 0
}

// sources reads source into backends: one address for all, or one per backend.
func (r *flowsReader) sources(path string, v any, backends map[string][]netip.Addr) {
	addr := func(p string, v any) (netip.Addr, bool) {
		s, _ := v.(string)
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			r.errorAt(p, "want the IPv4 address the backend sees, got %s", describeValue(v))
			return netip.Addr{}, false
		}
		return a, true
	}
	switch v := v.(type) {
	case nil:
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := path + "[" + k + "]"
			b, err := netip.ParseAddrPort(k)
			if err != nil || !listed(backends, b.String()) {
				r.errorAt(p, "not a backend expect lists (%s)", strings.Join(sortedKeys(backends), ", "))
				continue
			}
			if a, ok := addr(p, v[k]); ok {
				backends[b.String()] = []netip.Addr{a}
			}
		}
	default:
		a, ok := addr(path, v)
		if !ok {
			return
		}
		for b := range backends {
			backends[b] = []netip.Addr{a}
		}
	}
}

// servicePort is the Service port a flow to tgt dials, if any: a ClusterIP:port, a
// node's address and a nodePort, or an ingress or external IP and the port.
func (r *flowsReader) servicePort(tgt Target, protocol string) (proxy.ServicePort, bool) {
	for _, sp := range r.ports {
		if string(sp.Protocol) != protocol {
			continue
		}
		clusterIP := netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port)) == tgt.Addr
		nodePort := tgt.Node != "" && sp.NodePort != 0 && int(tgt.Addr.Port()) == sp.NodePort
		external := int(tgt.Addr.Port()) == sp.Port &&
			(slices.Contains(sp.LoadBalancerIPs, tgt.Addr.Addr()) || slices.Contains(sp.ExternalIPs, tgt.Addr.Addr()))
		if clusterIP || nodePort || external {
			return sp, true
		}
	}
	return proxy.ServicePort{}, false
}

func listed(backends map[string][]netip.Addr, b string) bool {
	_, ok := backends[b]
	return ok
}

func sortedKeys(m map[string][]netip.Addr) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describeValue names a decoded YAML value for an error message.
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing (null)"
	case string:
		return fmt.Sprintf("%q", v)
	case bool:
		return fmt.Sprint(v)
	case float64:
		return fmt.Sprintf("the number %v", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%v", v)
}
