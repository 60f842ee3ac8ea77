package trace

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// packet is a packet as a trace event shows it.
type packet struct {
	In, Out      string
	Src, Dst     netip.Addr
	Sport, Dport int
	// ID is the IP header's identification: the same in every hook and
	// namespace, different for a retransmission.
	ID int
}

func (p packet) String() string {
	var b strings.Builder
	if p.In != "" {
		fmt.Fprintf(&b, "in %s ", p.In)
	}
	if p.Out != "" {
		fmt.Fprintf(&b, "out %s ", p.Out)
	}
	fmt.Fprintf(&b, "%s > %s", netip.AddrPortFrom(p.Src, uint16(p.Sport)), netip.AddrPortFrom(p.Dst, uint16(p.Dport)))
	return b.String()
}

// parsePacketLine reads the packet of a trace event's packet line, in either
// xtables-monitor's form (PACKET: 2 ID IN=cni0 SRC=... SPORT=...) or nft's
// (trace id ID ip TABLE CHAIN packet: iif "cni0" ip saddr ... tcp sport ...).
func parsePacketLine(line string) (packet, bool) {
	f := strings.Fields(line)
	fields := map[string]string{}
	switch {
	case len(f) > 3 && f[0] == "PACKET:":
		for _, kv := range f[3:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				fields[k] = v
			}
		}
	case len(f) > 7 && f[0] == "trace" && f[6] == "packet:":
		// nft's names, as xtables-monitor's: "ip id" is the IP header's.
		names := map[string]string{"iif": "IN", "oif": "OUT", "saddr": "SRC", "daddr": "DST", "sport": "SPORT", "dport": "DPORT"}
		for i := 7; i+1 < len(f); i++ {
			k := names[f[i]]
			if f[i] == "id" && f[i-1] == "ip" {
				k = "ID"
			}
			if k != "" {
				fields[k] = strings.Trim(f[i+1], `"`)
			}
		}
	default:
		return packet{}, false
	}
	p := packet{In: fields["IN"], Out: fields["OUT"]}
	p.Src, _ = netip.ParseAddr(fields["SRC"])
	p.Dst, _ = netip.ParseAddr(fields["DST"])
	p.Sport, _ = strconv.Atoi(fields["SPORT"])
	p.Dport, _ = strconv.Atoi(fields["DPORT"])
	p.ID, _ = strconv.Atoi(fields["ID"])
	return p, p.Dst.IsValid()
}

var commentRE = regexp.MustCompile(`comment "([^"]*)"`)

// commentOf is a rule's comment, in either syntax.
func commentOf(text string) string {
	if m := commentRE.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}

// event is one hook of one packet, as read from a monitor.
type event struct {
	packet packet
	hook   Hook
	closed bool
}

// events groups a monitor's lines into hooks, in order, leaving out the
// packets of readiness probes (UDP to 127.0.0.1:port) and any packet after the
// first (a retransmitted SYN is traced too).
func events(lines []string, port int) []*event {
	var out []*event
	cur := map[string]*event{}
	skip := map[string]bool{}
	for _, line := range lines {
		f := strings.Fields(line)
		var id string
		switch {
		case len(f) > 3 && (f[0] == "PACKET:" || f[0] == "TRACE:"):
			id = f[2]
		case len(f) > 6 && f[0] == "trace" && f[1] == "id":
			id = f[2]
		default:
			continue
		}
		if p, ok := parsePacketLine(line); ok {
			skip[id] = p.Dst.String() == "127.0.0.1" && p.Dport == port ||
				len(out) > 0 && p.ID != out[0].packet.ID
			if skip[id] {
				continue
			}
			e := &event{packet: p}
			if f[0] == "trace" {
				e.hook.Table, e.hook.Chain = f[4], f[5]
			}
			e.hook.Packet = p.String()
			cur[id] = e
			out = append(out, e)
			continue
		}
		if skip[id] {
			continue
		}
		e := cur[id]
		if e == nil {
			// Events of a packet whose packet line came before the
			// monitor started: not the traced flow's.
			continue
		}
		if e.closed {
			// The same packet in its next base chain, its packet line
			// not repeated.
			e = &event{packet: e.packet, hook: Hook{Packet: e.hook.Packet}}
			cur[id] = e
			out = append(out, e)
		}
		if f[0] == "TRACE:" {
			xtEvent(e, f[3], restAfter(line, f[3]))
		} else {
			nftEvent(e, f, line)
		}
	}
	return out
}

// restAfter is what follows the first occurrence of field in line, trimmed.
func restAfter(line, field string) string {
	_, rest, _ := strings.Cut(line, field)
	return strings.TrimSpace(rest)
}

// xtEvent adds one xtables-monitor TRACE line to e: spec is
// table:chain:rule:HANDLE:VERDICT[:TARGET], table:chain:policy:VERDICT or
// table:chain:return:, text the rule in iptables-save's syntax.
func xtEvent(e *event, spec, text string) {
	parts := strings.Split(spec, ":")
	if len(parts) < 3 {
		return
	}
	table, chain := parts[0], parts[1]
	if e.hook.Table == "" {
		e.hook.Table, e.hook.Chain = table, chain
	}
	switch parts[2] {
	case "rule":
		text = strings.TrimPrefix(text, "-4 ")
		text = strings.TrimPrefix(text, "-t "+table+" ")
		v := ""
		if len(parts) > 4 {
			v = xtVerdict(parts[4:])
		}
		e.hook.Rules = append(e.hook.Rules, Rule{Table: table, Chain: chain, Verdict: v, Text: text, Comment: commentOf(text)})
		if v == "accept" || v == "drop" {
			e.hook.Verdict, e.closed = v, true
		}
	case "policy":
		if len(parts) > 3 {
			e.hook.Verdict = "policy " + strings.ToLower(parts[3])
		}
		e.closed = true
	}
}

// xtVerdict is nft's name of an xtables-monitor verdict (JUMP:CHAIN, ACCEPT,
// or the number of a verdict it has no name for).
func xtVerdict(v []string) string {
	names := map[string]string{"0xffffffff": "continue", "0xfffffffe": "break", "0xfffffffd": "jump", "0xfffffffc": "goto", "0xfffffffb": "return"}
	s := strings.ToLower(v[0])
	if n, ok := names[v[0]]; ok {
		s = n
	}
	if len(v) > 1 && v[1] != "" {
		s += " " + v[1]
	}
	return s
}

// nftEvent adds one `nft monitor trace` line (fields f) to e: rule TEXT
// (verdict V), verdict V, or policy V.
func nftEvent(e *event, f []string, line string) {
	table, chain := f[4], f[5]
	if e.hook.Table == "" {
		e.hook.Table, e.hook.Chain = table, chain
	}
	switch f[6] {
	case "rule":
		text := restAfter(line, " "+chain+" rule ")
		v := ""
		if i := strings.LastIndex(text, " (verdict "); i >= 0 {
			v = strings.TrimSuffix(text[i+len(" (verdict "):], ")")
			text = strings.TrimSpace(text[:i])
		}
		text = counterRE.ReplaceAllString(text, "")
		e.hook.Rules = append(e.hook.Rules, Rule{Table: table, Chain: chain, Verdict: v, Text: text, Comment: commentOf(text)})
		if v == "accept" || v == "drop" {
			e.hook.Verdict, e.closed = v, true
		}
	case "policy":
		if len(f) > 7 {
			e.hook.Verdict = "policy " + f[7]
		}
		e.closed = true
	}
}

// counterRE matches a rule's counter values, which differ from trace to trace.
var counterRE = regexp.MustCompile(` ?counter packets \d+ bytes \d+`)
