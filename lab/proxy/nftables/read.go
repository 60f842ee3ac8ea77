package nftables

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// The verdict maps kube-proxy dispatches Services with (see the package doc).
const (
	mapServiceIPs          = "service-ips"
	mapServiceNodePorts    = "service-nodeports"
	mapNoEndpointServices  = "no-endpoint-services"
	mapNoEndpointNodePorts = "no-endpoint-nodeports"
	mapFirewallIPs         = "firewall-ips"
)

// Read reads the Services of kube-proxy's table in ns, from `nft -j list table
// ip kube-proxy`: the frontends are the keys of the four verdict maps (the
// ClusterIPs, external IPs and load balancer IPs of service-ips, the NodePorts of
// service-nodeports, and the no-endpoint maps), and from
// each element of service-ips and service-nodeports the chains are followed as
// a new connection from outside the cluster (not a pod, not the node) would take
// them: "meta l4proto" matches pass when they name the frontend's protocol,
// matches on the source address or a local source do not apply (negated ones
// do), other matches are passed over as not applying; marks, counters and
// affinity updates pass; dnat, a numgen vmap (every element counts), goto,
// drop, reject and accept end the walk, a jump returns when its chain does. A
// frontend whose walk ends in no dnat takes its no-endpoint map's verdict, or
// is Untranslated. The affinity timeout is that of the affinity sets the
// "ip saddr @affinity-..." matches name. A load balancer IP in firewall-ips
// forwards from the ranges of its firewall chain's "ip saddr != { ... } drop"
// only. A node without the table has no Services: an empty map.
func Read(ns *namespaces.NS, _ proxy.Config) (proxy.ServiceMap, error) {
	out, err := ns.Output("nft", "-j", "list", "table", "ip", Table)
	if err != nil {
		if strings.Contains(err.Error(), "No such file or directory") {
			return proxy.ServiceMap{}, nil
		}
		return nil, fmt.Errorf("read nftables of %s: %w", ns, err)
	}
	m, err := readJSON(out)
	if err != nil {
		return nil, fmt.Errorf("read nftables of %s (nft -j list table ip %s): %w", ns, Table, err)
	}
	return m, nil
}

// ruleset is the part of nft's JSON listing Read needs.
type ruleset struct {
	chains map[string][]rule
	// maps holds each verdict map's elements: key parts and verdict.
	maps map[string][]element
	// timeouts are the sets' timeouts in seconds.
	timeouts map[string]int
}

type rule struct {
	chain  string
	handle int
	expr   []map[string]json.RawMessage
}

type element struct {
	key     []json.RawMessage
	verdict map[string]json.RawMessage
}

// readJSON summarises nft's JSON listing of kube-proxy's table.
func readJSON(listing []byte) (proxy.ServiceMap, error) {
	rs, err := parseListing(listing)
	if err != nil {
		return nil, err
	}
	out := proxy.ServiceMap{}
	refused := map[proxy.Frontend]proxy.Verdict{}
	err = rs.eachVerdict([]string{mapNoEndpointServices, mapNoEndpointNodePorts}, func(f proxy.Frontend, o proxy.Walk) {
		switch o.End {
		case proxy.WalkDrop:
			refused[f] = proxy.Drop
		case proxy.WalkReject:
			refused[f] = proxy.Reject
		}
	})
	if err != nil {
		return nil, err
	}
	err = rs.eachVerdict([]string{mapServiceIPs, mapServiceNodePorts}, func(f proxy.Frontend, o proxy.Walk) {
		out[f] = o.Forwarding(proxy.RefusedOr(refused, f))
	})
	if err != nil {
		return nil, err
	}
	for f, v := range refused {
		if _, ok := out[f]; !ok {
			out[f] = proxy.Forwarding{Verdict: v}
		}
	}
	for _, el := range rs.maps[mapFirewallIPs] {
		f, err := frontendOf(el.key)
		if err != nil {
			return nil, fmt.Errorf("map %s: %w", mapFirewallIPs, err)
		}
		ranges, err := rs.firewallRanges(el.verdict)
		if err != nil {
			return nil, fmt.Errorf("map %s: %s: %w", mapFirewallIPs, f, err)
		}
		if fw, ok := out[f]; ok {
			out[f] = fw.FirewalledBy(ranges)
		}
	}
	return out, nil
}

// eachVerdict follows the verdict of every element of the named maps, keyed by
// frontend, and hands each walk to f.
func (rs *ruleset) eachVerdict(maps []string, f func(proxy.Frontend, proxy.Walk)) error {
	for _, name := range maps {
		for _, el := range rs.maps[name] {
			fr, err := frontendOf(el.key)
			if err != nil {
				return fmt.Errorf("map %s: %w", name, err)
			}
			o, err := rs.verdict(el.verdict, fr, 0)
			if err != nil {
				return fmt.Errorf("map %s: %s: %w", name, fr, err)
			}
			f(fr, o)
		}
	}
	return nil
}

// firewallRanges reads the firewall chain a firewall-ips element goes to: kube-proxy
// writes one rule, "ip saddr != { SOURCES } drop": the source ranges, and the
// load balancer IPs when the node's address is in one of them.
func (rs *ruleset) firewallRanges(v map[string]json.RawMessage) ([]netip.Prefix, error) {
	raw, ok := v["goto"]
	if !ok {
		raw, ok = v["jump"]
	}
	if !ok {
		return nil, fmt.Errorf("verdict %v: want a goto to a firewall chain", v)
	}
	var t struct {
		Target string `json:"target"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("verdict %s: %w", raw, err)
	}
	rules, ok := rs.chains[t.Target]
	if !ok {
		return nil, fmt.Errorf("goto chain %s, which is not in the table", t.Target)
	}
	for _, r := range rules {
		var m struct {
			Op    string                     `json:"op"`
			Left  map[string]json.RawMessage `json:"left"`
			Right json.RawMessage            `json:"right"`
		}
		if len(r.expr) != 2 || r.expr[1]["drop"] == nil || r.expr[0]["match"] == nil {
			continue
		}
		if err := json.Unmarshal(r.expr[0]["match"], &m); err != nil || m.Op != "!=" || m.Left["payload"] == nil {
			continue
		}
		values := []json.RawMessage{m.Right}
		var set struct {
			Set []json.RawMessage `json:"set"`
		}
		if json.Unmarshal(m.Right, &set) == nil && set.Set != nil {
			values = set.Set
		}
		var out []netip.Prefix
		for _, v := range values {
			p, err := prefixOf(v)
			if err != nil {
				return nil, fmt.Errorf("chain %s, rule handle %d: %w", r.chain, r.handle, err)
			}
			out = append(out, p)
		}
		return out, nil
	}
	return nil, fmt.Errorf("chain %s drops no source outside a set of ranges", t.Target)
}

// prefixOf reads an address ("10.0.0.1", a /32) or a prefix ({"prefix": {"addr":
// "10.0.0.0", "len": 8}}).
func prefixOf(raw json.RawMessage) (netip.Prefix, error) {
	var addr string
	if json.Unmarshal(raw, &addr) == nil {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	var p struct {
		Prefix struct {
			Addr string `json:"addr"`
			Len  int    `json:"len"`
		} `json:"prefix"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return netip.Prefix{}, fmt.Errorf("range %s: %w", raw, err)
	}
	a, err := netip.ParseAddr(p.Prefix.Addr)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("range %s: %w", raw, err)
	}
	return netip.PrefixFrom(a, p.Prefix.Len), nil
}

// parseListing decodes `nft -j list table`: {"nftables": [{"metainfo": ...},
// {"table": ...}, {"chain": ...}, {"set": ...}, {"map": ...}, {"rule": ...}]}
// (libnftables-json(5)).
func parseListing(listing []byte) (*ruleset, error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(listing, &doc); err != nil {
		return nil, fmt.Errorf("not nft's JSON: %w", err)
	}
	rs := &ruleset{chains: map[string][]rule{}, maps: map[string][]element{}, timeouts: map[string]int{}}
	for _, obj := range doc.Nftables {
		for kind, raw := range obj {
			if err := rs.add(kind, raw); err != nil {
				return nil, err
			}
		}
	}
	return rs, nil
}

func (rs *ruleset) add(kind string, raw json.RawMessage) error {
	switch kind {
	case "chain":
		var c struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("chain: %w", err)
		}
		if _, ok := rs.chains[c.Name]; !ok {
			rs.chains[c.Name] = nil
		}
	case "rule":
		var r struct {
			Chain  string                       `json:"chain"`
			Handle int                          `json:"handle"`
			Expr   []map[string]json.RawMessage `json:"expr"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("rule: %w", err)
		}
		rs.chains[r.Chain] = append(rs.chains[r.Chain], rule{chain: r.Chain, handle: r.Handle, expr: r.Expr})
	case "set", "map":
		var s struct {
			Name    string            `json:"name"`
			Map     string            `json:"map"`
			Timeout int               `json:"timeout"`
			Elem    []json.RawMessage `json:"elem"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		rs.timeouts[s.Name] = s.Timeout
		if kind == "map" && s.Map == "verdict" {
			for _, e := range s.Elem {
				el, err := parseElement(e)
				if err != nil {
					return fmt.Errorf("map %s: %w", s.Name, err)
				}
				rs.maps[s.Name] = append(rs.maps[s.Name], el)
			}
		}
	}
	return nil
}

// parseElement reads a verdict map's element: [key, verdict], the key a concat
// of parts, wrapped in {"elem": {"val": ..., "comment": ...}} when it carries a
// comment.
func parseElement(raw json.RawMessage) (element, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return element{}, fmt.Errorf("element %s: not [key, verdict]", raw)
	}
	key := pair[0]
	var wrapped struct {
		Elem *struct {
			Val json.RawMessage `json:"val"`
		} `json:"elem"`
	}
	if json.Unmarshal(key, &wrapped) == nil && wrapped.Elem != nil {
		key = wrapped.Elem.Val
	}
	var concat struct {
		Concat []json.RawMessage `json:"concat"`
	}
	el := element{}
	if err := json.Unmarshal(key, &concat); err != nil || concat.Concat == nil {
		el.key = []json.RawMessage{key}
	} else {
		el.key = concat.Concat
	}
	if err := json.Unmarshal(pair[1], &el.verdict); err != nil {
		return element{}, fmt.Errorf("element %s: verdict: %w", raw, err)
	}
	return el, nil
}

// frontendOf reads a map key: address . protocol . port, or protocol . port
// for a NodePort.
func frontendOf(key []json.RawMessage) (proxy.Frontend, error) {
	var f proxy.Frontend
	parts := key
	if len(parts) == 3 {
		var s string
		if err := json.Unmarshal(parts[0], &s); err != nil {
			return f, fmt.Errorf("key %s: address: %w", key, err)
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return f, fmt.Errorf("key %s: %w", key, err)
		}
		f.Addr = a
		parts = parts[1:]
	}
	if len(parts) != 2 {
		return f, fmt.Errorf("key %s: want [address .] protocol . port", key)
	}
	proto, err := protocolOf(parts[0])
	if err != nil {
		return f, fmt.Errorf("key %s: %w", key, err)
	}
	port, err := portOf(parts[1])
	if err != nil {
		return f, fmt.Errorf("key %s: %w", key, err)
	}
	f.Protocol, f.Port = proto, port
	return f, nil
}

// protocolOf reads an inet_proto: nft names the ones it knows ("tcp") and
// prints the number of others.
func protocolOf(raw json.RawMessage) (corev1.Protocol, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return corev1.Protocol(strings.ToUpper(name)), nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf("protocol %s: %w", raw, err)
	}
	switch n {
	case 6:
		return corev1.ProtocolTCP, nil
	case 17:
		return corev1.ProtocolUDP, nil
	case 132:
		return corev1.ProtocolSCTP, nil
	}
	return corev1.Protocol(strconv.Itoa(n)), nil
}

// portOf reads an inet_service, a number (or, from an nft asked to name
// services, a numeric string).
func portOf(raw json.RawMessage) (uint16, error) {
	var n uint16
	if json.Unmarshal(raw, &n) == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("port %s: %w", raw, err)
	}
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %q: %w", s, err)
	}
	return uint16(p), nil
}

// verdict follows a verdict (a map element's value or a rule's statement) for
// frontend f's traffic.
func (rs *ruleset) verdict(v map[string]json.RawMessage, f proxy.Frontend, depth int) (proxy.Walk, error) {
	for kind, raw := range v {
		switch kind {
		case "drop":
			return proxy.Walk{End: proxy.WalkDrop}, nil
		case "reject":
			return proxy.Walk{End: proxy.WalkReject}, nil
		case "accept":
			return proxy.Walk{End: proxy.WalkAccept}, nil
		case "goto", "jump":
			var t struct {
				Target string `json:"target"`
			}
			if err := json.Unmarshal(raw, &t); err != nil {
				return proxy.Walk{}, fmt.Errorf("%s %s: %w", kind, raw, err)
			}
			rules, ok := rs.chains[t.Target]
			if !ok {
				return proxy.Walk{}, fmt.Errorf("%s to chain %s, which is not in the table", kind, t.Target)
			}
			return rs.walk(rules, f, depth+1)
		}
		return proxy.Walk{}, fmt.Errorf("verdict %s not understood", kind)
	}
	return proxy.Walk{}, errors.New("empty verdict")
}

// walk follows a chain's rules (see Read).
func (rs *ruleset) walk(rules []rule, f proxy.Frontend, depth int) (proxy.Walk, error) {
	if depth > proxy.MaxWalkDepth {
		return proxy.Walk{}, errors.New("chains nest deeper than kube-proxy's (a loop?)")
	}
	affinity := 0
	for _, r := range rules {
		o, stop, err := rs.rule(r, f, &affinity, depth)
		if err != nil {
			return proxy.Walk{}, fmt.Errorf("chain %s, rule handle %d: %w", r.chain, r.handle, err)
		}
		if stop {
			if o.End == proxy.WalkDNAT {
				o.Affinity = max(o.Affinity, affinity)
			}
			return o, nil
		}
	}
	return proxy.Walk{}, nil
}

// rule evaluates one rule; stop tells that the chain ends with it (a verdict, a
// dnat, or a goto, after which the chain's later rules are not reached).
// Affinity set references raise *affinity to their timeout.
func (rs *ruleset) rule(r rule, f proxy.Frontend, affinity *int, depth int) (o proxy.Walk, stop bool, err error) {
	for _, e := range r.expr {
		for kind, raw := range e {
			switch kind {
			case "match":
				applies, set, err := matches(raw, f)
				if err != nil {
					return proxy.Walk{}, false, err
				}
				if set != "" {
					*affinity = max(*affinity, rs.timeouts[set])
				}
				if !applies {
					return proxy.Walk{}, false, nil
				}
			case "mangle", "counter", "set", "log", "notrack", "meta", "ct":
				// Marks, counters, affinity updates: the packet goes on.
			case "dnat":
				backends, err := dnatTargets(raw)
				if err != nil {
					return proxy.Walk{}, false, err
				}
				return proxy.Walk{End: proxy.WalkDNAT, Backends: backends}, true, nil
			case "vmap":
				o, err := rs.randomVmap(raw, f, depth)
				return o, true, err
			case "goto":
				o, err := rs.verdict(e, f, depth)
				return o, true, err
			case "jump":
				o, err := rs.verdict(e, f, depth)
				return o, o.End != proxy.WalkNone, err
			case "return":
				return proxy.Walk{}, true, nil
			case "drop", "reject", "accept":
				o, err := rs.verdict(e, f, depth)
				return o, true, err
			default:
				return proxy.Walk{}, false, fmt.Errorf("statement %s not understood", kind)
			}
		}
	}
	return proxy.Walk{}, false, nil
}

// matches tells whether a match applies to f's traffic from outside the
// cluster; set names the affinity set an "ip saddr @set" match looks in.
func matches(raw json.RawMessage, f proxy.Frontend) (applies bool, set string, err error) {
	var m struct {
		Op    string                     `json:"op"`
		Left  map[string]json.RawMessage `json:"left"`
		Right json.RawMessage            `json:"right"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return false, "", fmt.Errorf("match %s: %w", raw, err)
	}
	negated := m.Op == "!="
	if meta, ok := m.Left["meta"]; ok {
		var k struct {
			Key string `json:"key"`
		}
		json.Unmarshal(meta, &k)
		if k.Key == "l4proto" {
			// One protocol, or a set of them ("meta l4proto { tcp, udp }").
			values := []json.RawMessage{m.Right}
			var set struct {
				Set []json.RawMessage `json:"set"`
			}
			if json.Unmarshal(m.Right, &set) == nil && set.Set != nil {
				values = set.Set
			}
			in := false
			for _, v := range values {
				p, err := protocolOf(v)
				if err != nil {
					return false, "", fmt.Errorf("match %s: %w", raw, err)
				}
				in = in || p == f.Protocol
			}
			return in != negated, "", nil
		}
	}
	if payload, ok := m.Left["payload"]; ok {
		var p struct {
			Field string `json:"field"`
		}
		json.Unmarshal(payload, &p)
		if p.Field == "saddr" {
			var name string
			if json.Unmarshal(m.Right, &name) == nil && strings.HasPrefix(name, "@") {
				// An affinity set: clients that used an endpoint lately, not the
				// new connections summarised.
				return false, strings.TrimPrefix(name, "@"), nil
			}
			return negated, "", nil
		}
	}
	if fib, ok := m.Left["fib"]; ok {
		var fb struct {
			Flags []string `json:"flags"`
		}
		json.Unmarshal(fib, &fb)
		if len(fb.Flags) == 1 && fb.Flags[0] == "saddr" {
			// "fib saddr type local": traffic from the node itself.
			return negated, "", nil
		}
	}
	return false, "", nil
}

// dnatTargets reads a dnat statement: {"addr": IP, "port": N}, or an addr that
// maps a numgen draw to IP . PORT (or to IP, with the port beside).
func dnatTargets(raw json.RawMessage) ([]netip.AddrPort, error) {
	var d struct {
		Addr json.RawMessage `json:"addr"`
		Port json.RawMessage `json:"port"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("dnat %s: %w", raw, err)
	}
	var port uint16
	if d.Port != nil {
		p, err := portOf(d.Port)
		if err != nil {
			return nil, fmt.Errorf("dnat %s: %w", raw, err)
		}
		port = p
	}
	var addr string
	if json.Unmarshal(d.Addr, &addr) == nil {
		a, err := netip.ParseAddr(addr)
		if err != nil || d.Port == nil {
			return nil, fmt.Errorf("dnat %s: want an address and a port", raw)
		}
		return []netip.AddrPort{netip.AddrPortFrom(a, port)}, nil
	}
	var m struct {
		Map struct {
			Key  map[string]json.RawMessage `json:"key"`
			Data struct {
				Set [][2]json.RawMessage `json:"set"`
			} `json:"data"`
		} `json:"map"`
	}
	if err := json.Unmarshal(d.Addr, &m); err != nil || m.Map.Key["numgen"] == nil {
		return nil, fmt.Errorf("dnat %s: not a numgen map", raw)
	}
	var out []netip.AddrPort
	for _, kv := range m.Map.Data.Set {
		var parts struct {
			Concat []json.RawMessage `json:"concat"`
		}
		ipRaw, portRaw := kv[1], d.Port
		if json.Unmarshal(kv[1], &parts) == nil && len(parts.Concat) == 2 {
			ipRaw, portRaw = parts.Concat[0], parts.Concat[1]
		}
		var ip string
		if err := json.Unmarshal(ipRaw, &ip); err != nil {
			return nil, fmt.Errorf("dnat map element %s: %w", kv[1], err)
		}
		a, err := netip.ParseAddr(ip)
		if err != nil || portRaw == nil {
			return nil, fmt.Errorf("dnat map element %s: want an address and a port", kv[1])
		}
		p, err := portOf(portRaw)
		if err != nil {
			return nil, fmt.Errorf("dnat map element %s: %w", kv[1], err)
		}
		out = append(out, netip.AddrPortFrom(a, p))
	}
	return out, nil
}

// randomVmap reads `numgen random mod N vmap { 0 : goto endpoint-..., ... }`:
// every element's chain is one of the endpoints a new connection may go to.
func (rs *ruleset) randomVmap(raw json.RawMessage, f proxy.Frontend, depth int) (proxy.Walk, error) {
	var v struct {
		Key  map[string]json.RawMessage `json:"key"`
		Data struct {
			Set [][2]json.RawMessage `json:"set"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Key["numgen"] == nil {
		return proxy.Walk{}, fmt.Errorf("vmap %s: not a numgen vmap", raw)
	}
	all := proxy.Walk{}
	for _, kv := range v.Data.Set {
		var verdict map[string]json.RawMessage
		if err := json.Unmarshal(kv[1], &verdict); err != nil {
			return proxy.Walk{}, fmt.Errorf("vmap element %s: %w", kv[1], err)
		}
		o, err := rs.verdict(verdict, f, depth)
		if err != nil {
			return proxy.Walk{}, err
		}
		if o.End == proxy.WalkDNAT {
			all.End = proxy.WalkDNAT
			all.Backends = append(all.Backends, o.Backends...)
			all.Affinity = max(all.Affinity, o.Affinity)
		}
	}
	return all, nil
}
