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
