package proxy

import "net/netip"

// WalkEnd is how a reader's walk through a node's rules, following a new
// connection's first packet, ended.
type WalkEnd int

const (
	// WalkNone: no rule took the packet; it goes on after the jump that led here.
	WalkNone WalkEnd = iota
	WalkDNAT
	WalkDrop
	WalkReject
	// WalkAccept: accepted untranslated (ACCEPT ends the nat table's walk).
	WalkAccept
)

// Walk is what a reader's walk through a node's rules met: how it ended, the
// backends it could DNAT to and the affinity timeout in seconds, if any.
type Walk struct {
	End      WalkEnd
	Backends []netip.AddrPort
	Affinity int
}

// MaxWalkDepth bounds the chains a walk follows: kube-proxy's go three deep
// (KUBE-EXT-, KUBE-SVC-, KUBE-SEP- in iptables mode; external-, service-,
// endpoint- in nftables mode), so a deeper walk is a loop.
const MaxWalkDepth = 8

// Forwarding is what the walk makes of a frontend's new connections: a DNAT's
// backends, a drop or a rejection, and otherwise (no rule of the walk took the
// packet) the verdict unmatched, which a filter rule outside the walk may set.
func (w Walk) Forwarding(unmatched Verdict) Forwarding {
	switch w.End {
	case WalkDNAT:
		return Forwarded(w.Backends, w.Affinity)
	case WalkDrop:
		return Forwarding{Verdict: Drop}
	case WalkReject:
		return Forwarding{Verdict: Reject}
	default:
		return Forwarding{Verdict: unmatched}
	}
}

// RefusedOr is refused's verdict for f, or Untranslated when it has none.
func RefusedOr(refused map[Frontend]Verdict, f Frontend) Verdict {
	if v, ok := refused[f]; ok {
		return v
	}
	return Untranslated
}
