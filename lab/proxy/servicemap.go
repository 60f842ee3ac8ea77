package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ServiceMap summarises a node's Service dataplane independently of the mode that
// programs it: for each frontend, what a new connection to it from outside the
// cluster meets. The lab reads one back from a node's kernel (Mode.Read) and
// compares it with ExpectedServiceMap to know when the node reflects the state
// in the API.
type ServiceMap map[Frontend]Forwarding

// Frontend is where a Service takes traffic on a node.
type Frontend struct {
	Protocol corev1.Protocol
	// Addr is the address connections are made to (a ClusterIP, an external IP
	// or a load balancer IP); the zero Addr is a NodePort, which answers on the
	// node's addresses.
	Addr netip.Addr
	Port uint16
}

// ClusterIPFrontend is proto to addr:port: a ClusterIP, an external IP or a load
// balancer IP (a node's rules treat them alike but for the traffic policy).
func ClusterIPFrontend(proto corev1.Protocol, addr netip.Addr, port int) Frontend {
	return Frontend{Protocol: proto, Addr: addr, Port: uint16(port)}
}

// NodePortFrontend is proto to the node's port nodePort.
func NodePortFrontend(proto corev1.Protocol, nodePort int) Frontend {
	return Frontend{Protocol: proto, Port: uint16(nodePort)}
}

// IsNodePort tells whether f is a NodePort.
func (f Frontend) IsNodePort() bool { return !f.Addr.IsValid() }

// String is "TCP 10.96.0.10:53" or "TCP nodePort 30080".
func (f Frontend) String() string {
	if f.IsNodePort() {
		return fmt.Sprintf("%s nodePort %d", f.Protocol, f.Port)
	}
	return fmt.Sprintf("%s %s", f.Protocol, netip.AddrPortFrom(f.Addr, f.Port))
}

// Verdict is what happens to a new connection to a frontend.
type Verdict int

// Verdicts.
const (
	// Forward: translated to one of Backends.
	Forward Verdict = iota + 1
	// Reject: refused at once (ICMP port unreachable, or a TCP reset): the
	// Service has no usable endpoint anywhere.
	Reject
	// Drop: silently dropped: a Local traffic policy and no local endpoint.
	Drop
	// Untranslated: the Service's rules match but neither translate nor refuse
	// it, so it goes on to the node itself. kube-proxy never means this; it is
	// seen when its rules are half written or changed by someone else.
	Untranslated
	// Inconsistent: a frontend the mode programs once per node address (IPVS'
	// NodePorts) treats the addresses differently; Detail says how.
	Inconsistent
)

func (v Verdict) String() string {
	switch v {
	case Forward:
		return "forward"
	case Reject:
		return "reject"
	case Drop:
		return "drop"
	case Untranslated:
		return "untranslated"
	case Inconsistent:
		return "inconsistent"
	}
	return "verdict " + strconv.Itoa(int(v))
}

// Forwarding is what a frontend does with a new connection.
type Forwarding struct {
	Verdict Verdict
	// Backends are the endpoints a Forward picks from, sorted; for Inconsistent,
	// every backend of any node address.
	Backends []netip.AddrPort
	// AffinitySeconds is ClientIP session affinity's timeout when the frontend
	// forwards with it; 0 without.
	AffinitySeconds int
	// Detail says, for Inconsistent, what each node address does.
	Detail string
	// SourceRanges, for a Forward or a Reject, are the only sources (sorted)
	// that meet it; the firewall drops the others. Empty: every source. They
	// are what the rules list, the load balancer IPs kube-proxy lets in when
	// the node's address is in a range among them (ServicePort.FirewallSources).
	SourceRanges []netip.Prefix
}

// FirewalledBy is f with sources limited to ranges, when f forwards or rejects;
// a drop meets every source alike.
func (f Forwarding) FirewalledBy(ranges []netip.Prefix) Forwarding {
	if (f.Verdict != Forward && f.Verdict != Reject) || len(ranges) == 0 {
		return f
	}
	r := slices.Clone(ranges)
	slices.SortFunc(r, comparePrefixes)
	f.SourceRanges = slices.Compact(r)
	return f
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// Forwarded is a Forward to backends (sorted and deduplicated here), with
// affinity seconds, or a Reject when backends is empty: no endpoint left, so the
// connection is refused.
func Forwarded(backends []netip.AddrPort, affinitySeconds int) Forwarding {
	if len(backends) == 0 {
		return Forwarding{Verdict: Reject}
	}
	b := slices.Clone(backends)
	slices.SortFunc(b, netip.AddrPort.Compare)
	return Forwarding{Verdict: Forward, Backends: slices.Compact(b), AffinitySeconds: affinitySeconds}
}

// String is "forward to 10.244.1.10:8080 10.244.2.10:8080 (affinity 60s)",
// "reject", "drop", ...
func (f Forwarding) String() string {
	if f.Verdict == Inconsistent {
		return "inconsistent (" + f.Detail + ")"
	}
	var b strings.Builder
	b.WriteString(f.Verdict.String())
	if f.Verdict == Forward {
		b.WriteString(" to")
	}
	for _, be := range f.Backends {
		b.WriteString(" " + be.String())
	}
	if f.AffinitySeconds > 0 {
		fmt.Fprintf(&b, " (affinity %ds)", f.AffinitySeconds)
	}
	if len(f.SourceRanges) > 0 {
		b.WriteString(" from")
		for _, r := range f.SourceRanges {
			b.WriteString(" " + r.String())
		}
		b.WriteString(" only")
	}
	return b.String()
}

// Equal tells whether f and g forward alike.
func (f Forwarding) Equal(g Forwarding) bool {
	return f.Verdict == g.Verdict && f.AffinitySeconds == g.AffinitySeconds && f.Detail == g.Detail &&
		slices.Equal(f.Backends, g.Backends) && slices.Equal(f.SourceRanges, g.SourceRanges)
}

// Frontends lists m's frontends in a stable order: by protocol, ClusterIPs before
// NodePorts, then by address and port.
func (m ServiceMap) Frontends() []Frontend {
	fs := make([]Frontend, 0, len(m))
	for f := range m {
		fs = append(fs, f)
	}
	sort.Slice(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Protocol != b.Protocol {
			return a.Protocol < b.Protocol
		}
		if a.IsNodePort() != b.IsNodePort() {
			return !a.IsNodePort()
		}
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c < 0
		}
		return a.Port < b.Port
	})
	return fs
}

// String is one line per frontend, "TCP 10.96.0.10:53: forward to ...".
func (m ServiceMap) String() string {
	var b strings.Builder
	for _, f := range m.Frontends() {
		fmt.Fprintf(&b, "%s: %s\n", f, m[f])
	}
	return b.String()
}

// DiffServiceMaps lists how got differs from want, one line per frontend, in
// Frontends' order; nil when they agree.
func DiffServiceMaps(want, got ServiceMap) []string {
	all := ServiceMap{}
	for f := range want {
		all[f] = Forwarding{}
	}
	for f := range got {
		all[f] = Forwarding{}
	}
	var out []string
	for _, f := range all.Frontends() {
		w, inWant := want[f]
		g, inGot := got[f]
		switch {
		case !inGot:
			out = append(out, fmt.Sprintf("%s: missing (want %s)", f, w))
		case !inWant:
			out = append(out, fmt.Sprintf("%s: not expected (got %s)", f, g))
		case !w.Equal(g):
			line := fmt.Sprintf("%s: want %s, got %s", f, w, g)
			if w.Verdict == Forward && g.Verdict == Forward {
				line += backendChange(w.Backends, g.Backends)
			}
			out = append(out, line)
		}
	}
	return out
}

// backendChange names the backends one side has and the other lacks, which a
// long list hides.
func backendChange(want, got []netip.AddrPort) string {
	var missing, extra []string
	for _, b := range want {
		if !slices.Contains(got, b) {
			missing = append(missing, b.String())
		}
	}
	for _, b := range got {
		if !slices.Contains(want, b) {
			extra = append(extra, b.String())
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, " "))
	}
	if len(extra) > 0 {
		parts = append(parts, "extra "+strings.Join(extra, " "))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
