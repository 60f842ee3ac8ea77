// Package trace follows one real connection (or datagram) through a running lab
// and reports what the kernel did with it: for every network namespace it
// crossed, in order, the netfilter hooks and rules that matched (with chain,
// table and verdict), the route taken, the conntrack entry it made (original
// and reply tuples: DNAT and SNAT as recorded), IPVS's choice where IPVS is the
// mode, and how it ended.
//
// nf_tables rules (nftables mode, and iptables' nft backend) are followed by
// the kernel's own trace events: a temporary table in each namespace sets
// nftrace on the flow's first packet, and `nft monitor trace` (nftables) or
// `xtables-monitor --trace` (iptables-nft, which prints rules as iptables-save
// does) reads the events. iptables-legacy has no such events in a network
// namespace (its TRACE target logs to the host's kernel log), so its rules are
// read from per-rule counter deltas (iptables-legacy-save -c before and after),
// which needs an otherwise quiet lab. The temporary tables are removed before
// Run returns: a trace leaves the lab as it found it.
package trace

import (
	"net/netip"

	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/traffic"
)

// Lab is what a trace needs to know of a running lab.
type Lab struct {
	ID string
	// Mode is the proxy mode (iptables, ipvs, nftables) and Backend the
	// xtables backend of the modes that write iptables rules ("" is nft).
	Mode, Backend string
	Members       []record.Member
	// RecordDir is where the lab is recorded (record.DefaultDir when
	// empty): a trace records what it creates in the lab's run directory
	// there, for record.RemoveKilledTraces.
	RecordDir string
}

// FromRecord is the lab a record describes: a running lab's own
// (lab.Lab.Record) or one read from the run directory.
func FromRecord(r record.Lab) Lab {
	return Lab{ID: r.ID, Mode: r.Mode, Backend: r.Backend, Members: r.Members}
}

// Methods of reading the rules a packet matched.
const (
	MethodNFTMonitor   = "nftrace (nft monitor trace)"
	MethodXTMonitor    = "nftrace (xtables-monitor --trace)"
	MethodCounterDelta = "per-rule counter deltas (iptables-legacy-save -c before and after; the lab must be otherwise quiet)"
)

// Trace is one traced flow.
type Trace struct {
	Lab      string `json:"lab"`
	Mode     string `json:"mode"`
	Method   string `json:"method"`
	From     string `json:"from"`
	Protocol string `json:"protocol"`
	// Source is the client's address and port before any NAT; To what it dialed.
	Source netip.AddrPort `json:"source"`
	To     netip.AddrPort `json:"to"`
	Hops   []Hop          `json:"hops"`
	End    End            `json:"end"`
}

// Hop is one network namespace the flow's first packet crossed.
type Hop struct {
	Member string `json:"member"`
	Kind   string `json:"kind"`
	// Hooks are the netfilter base chains the packet went through here, in
	// order, with the rules that matched in each (nftrace).
	Hooks []Hook `json:"hooks,omitempty"`
	// Counters are the rules whose counters grew (iptables-legacy).
	Counters []Rule `json:"counters,omitempty"`
	// Route is the route the namespace took for the packet, as `ip route get`
	// prints it.
	Route     string     `json:"route,omitempty"`
	Conntrack *Conntrack `json:"conntrack,omitempty"`
	// IPVS are the IPVS connection table's entries for the flow (ipvsadm -Lnc).
	IPVS []string `json:"ipvs,omitempty"`
	// IPVSEmpty is the virtual service the packet met here that has no real
	// server (as ipvsadm -Ln names it): IPVS itself refuses such a flow, with
	// an ICMP port unreachable, in the hook where it met it.
	IPVSEmpty string `json:"ipvsEmpty,omitempty"`
}

// Hook is one base chain a packet went through: its table and chain, the
// packet as it entered, the rules that matched and the verdict it left with.
type Hook struct {
	Table   string `json:"table"`
	Chain   string `json:"chain"`
	Packet  string `json:"packet"`
	Rules   []Rule `json:"rules"`
	Verdict string `json:"verdict,omitempty"`
}

// Rule is one rule that matched.
type Rule struct {
	Table   string `json:"table"`
	Chain   string `json:"chain"`
	Verdict string `json:"verdict"`
	// Text is the rule as the mode writes it (iptables-save or nft syntax),
	// comment included.
	Text    string `json:"text"`
	Comment string `json:"comment,omitempty"`
	// Packets is the counter delta (iptables-legacy only).
	Packets uint64 `json:"packets,omitempty"`
}

// Conntrack is the conntrack entry the flow made in one namespace.
type Conntrack struct {
	Original Tuple `json:"original"`
	Reply    Tuple `json:"reply"`
	// DNAT and SNAT are the translations the entry records, if any.
	DNAT string `json:"dnat,omitempty"`
	SNAT string `json:"snat,omitempty"`
	// State is TCP's state (empty for UDP).
	State string `json:"state,omitempty"`
}

// Tuple is one direction of a conntrack entry.
type Tuple struct {
	Src netip.AddrPort `json:"src"`
	Dst netip.AddrPort `json:"dst"`
}

// Outcomes of a flow.
const (
	Answered = "answered"
	Refused  = "refused"
	Dropped  = "dropped"
)

// End is how the flow ended.
type End struct {
	Outcome string `json:"outcome"`
	// Observed is what the client saw, as verify classifies it.
	Observed traffic.Outcome `json:"observed"`
	// Pod and Backend answered (answered), seeing the source Seen.
	Pod     string         `json:"pod,omitempty"`
	Backend netip.AddrPort `json:"backend,omitempty"`
	Seen    netip.AddrPort `json:"seen,omitempty"`
	// By is who refused or dropped it: a rule (Rule, in namespace Member), or
	// the host that had no listener.
	By     string `json:"by,omitempty"`
	Member string `json:"member,omitempty"`
	Rule   *Rule  `json:"rule,omitempty"`
	// Error is the client's error, for flows not answered.
	Error string `json:"error,omitempty"`
}
