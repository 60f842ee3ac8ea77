package compare

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// An nftables ruleset as compared: kube-proxy's tables ("ip kube-proxy", "ip6
// kube-proxy") of `nft list ruleset` (with or without -a's handles), each
// chain's declarations and rules in order, each set's and map's declarations,
// and its elements as a set. Counters' values, handles, the order of chains,
// sets and elements, and the elements of dynamic sets (ClientIP affinity's
// sources, which traffic adds and time expires) are not compared.
type nftRuleset map[string]*nftTable

type nftTable struct {
	// chains maps a chain's name to its declarations and rules;
	// sets a set's or map's name to its declarations.
	chains, sets map[string][]string
	// elements are each set's or map's elements.
	elements map[string]map[string]bool
}

var (
	nftHandle  = regexp.MustCompile(`\s+# handle \d+$`)
	nftCounter = regexp.MustCompile(`counter packets \d+ bytes \d+`)
	nftExpires = regexp.MustCompile(` expires [0-9hms.]+`)
	nftOpen    = regexp.MustCompile(`^(table|chain|set|map) (.+) \{$`)
)

// kubeProxyTable tells whether a table ("ip kube-proxy") is kube-proxy's:
// only those count, as a node's other tables (CNI, firewalld) are not
// kube-proxy's business.
func kubeProxyTable(t string) bool { return t == "ip kube-proxy" || t == "ip6 kube-proxy" }

// parseNFT reads `nft list ruleset` (or `nft list table ...`) output.
func parseNFT(text string) (nftRuleset, error) {
	rs := nftRuleset{}
	saw := false
	var table *nftTable
	var kind, name string // the chain, set or map being read
	var elems strings.Builder
	inElems := false
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(nftHandle.ReplaceAllString(raw, ""))
		if line == "" {
			continue
		}
		if inElems {
			elems.WriteString(" " + line)
			if strings.HasSuffix(line, "}") {
				inElems = false
				table.addElements(name, elems.String())
			}
			continue
		}
		if m := nftOpen.FindStringSubmatch(line); m != nil {
			switch {
			case m[1] == "table":
				saw = true
				table = nil
				if kubeProxyTable(m[2]) {
					table = &nftTable{chains: map[string][]string{}, sets: map[string][]string{}, elements: map[string]map[string]bool{}}
					rs[m[2]] = table
				}
				kind = "table"
			case kind != "table":
				return nil, fmt.Errorf("line %d: %s %s inside %s %s", n+1, m[1], m[2], kind, name)
			default:
				kind, name = m[1], m[2]
				if table != nil && kind == "chain" {
					table.chains[name] = []string{}
				} else if table != nil {
					table.sets[name] = []string{}
					table.elements[name] = map[string]bool{}
				}
			}
			continue
		}
		if line == "}" {
			if kind == "table" {
				kind = ""
			} else {
				kind = "table"
			}
			continue
		}
		if table == nil || kind == "table" || kind == "" {
			continue
		}
		if kind == "chain" {
			table.chains[name] = append(table.chains[name], nftCounter.ReplaceAllString(line, "counter"))
			continue
		}
		if rest, ok := strings.CutPrefix(line, "elements = "); ok {
			elems.Reset()
			elems.WriteString(rest)
			if strings.HasSuffix(rest, "}") {
				table.addElements(name, rest)
			} else {
				inElems = true
			}
			continue
		}
		table.sets[name] = append(table.sets[name], line)
	}
	if !saw {
		return nil, fmt.Errorf("%w: no nftables table in it (no line like \"table ip kube-proxy {\"; %s)", ErrNotADump, firstLine(text))
	}
	return rs, nil
}

// addElements adds the elements of "{ a, b, c }" to set name.
func (t *nftTable) addElements(name, list string) {
	list = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(list), "{"), "}")
	depth, start := 0, 0
	add := func(e string) {
		if e = strings.TrimSpace(nftExpires.ReplaceAllString(nftCounter.ReplaceAllString(e, "counter"), "")); e != "" {
			t.elements[name][e] = true
		}
	}
	for i, r := range list {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				add(list[start:i])
				start = i + 1
			}
		}
	}
	add(list[start:])
}

// dynamic tells whether set name is filled by traffic (flags dynamic).
func (t *nftTable) dynamic(name string) bool {
	return slices.ContainsFunc(t.sets[name], func(l string) bool {
		return strings.HasPrefix(l, "flags ") && strings.Contains(l, "dynamic")
	})
}

// NFTables compares a node's nftables ruleset (dump) with want, the ruleset
// the real kube-proxy programmed for the same state, both as `nft list
// ruleset` prints them.
func NFTables(want, dump string) (*Report, error) {
	w, err := parseNFT(want)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy's ruleset: %w", err)
	}
	d, err := parseNFT(dump)
	if err != nil {
		return nil, err
	}
	names := nftNames(w, d)
	c := collector{}
	for _, tn := range slices.Sorted(maps.Keys(union(w, d))) {
		wt, dt := w.get(tn), d.get(tn)
		for _, ch := range slices.Sorted(maps.Keys(union(wt.chains, dt.chains))) {
			a, b := wt.chains[ch], dt.chains[ch]
			if _, ok := wt.chains[ch]; !ok {
				c.add(names.of(ch, ""), Line{Table: tn, Chain: ch}, false)
			} else if _, ok := dt.chains[ch]; !ok {
				c.add(names.of(ch, ""), Line{Table: tn, Chain: ch}, true)
			}
			for _, op := range difflib.NewMatcher(a, b).GetOpCodes() {
				if op.Tag == 'e' {
					for _, r := range a[op.I1:op.I2] {
						c.same(names.of(ch, r))
					}
					continue
				}
				// A rule that differs only in its endpoints (the numgen map
				// of a Service chain) is about each endpoint one side lacks.
				if op.Tag == 'r' && op.I2-op.I1 == 1 && op.J2-op.J1 == 1 {
					if eps := endpointDiff(a[op.I1], b[op.J1]); len(eps) > 0 {
						for ep, missing := range eps {
							rule := a[op.I1]
							if !missing {
								rule = b[op.J1]
							}
							c.add(names.endpoint(ch, ep), Line{Table: tn, Chain: ch, Rule: rule}, missing)
						}
						continue
					}
				}
				for _, r := range a[op.I1:op.I2] {
					c.add(names.of(ch, r), Line{Table: tn, Chain: ch, Rule: r}, true)
				}
				for _, r := range b[op.J1:op.J2] {
					c.add(names.of(ch, r), Line{Table: tn, Chain: ch, Rule: r}, false)
				}
			}
		}
		for _, set := range slices.Sorted(maps.Keys(union(wt.sets, dt.sets))) {
			decl := func(t *nftTable) string { return strings.Join(t.sets[set], "; ") }
			if _, ok := wt.sets[set]; !ok {
				c.add(names.of(set, ""), Line{Table: tn, Chain: set, Rule: "set " + set + " { " + decl(dt) + " }"}, false)
			} else if _, ok := dt.sets[set]; !ok {
				c.add(names.of(set, ""), Line{Table: tn, Chain: set, Rule: "set " + set + " { " + decl(wt) + " }"}, true)
			} else if decl(wt) != decl(dt) {
				c.add(names.of(set, ""), Line{Table: tn, Chain: set, Rule: "set " + set + " { " + decl(wt) + " }"}, true)
				c.add(names.of(set, ""), Line{Table: tn, Chain: set, Rule: "set " + set + " { " + decl(dt) + " }"}, false)
			}
			if wt.dynamic(set) || dt.dynamic(set) {
				continue
			}
			for _, e := range slices.Sorted(maps.Keys(union(wt.elements[set], dt.elements[set]))) {
				l := Line{Table: tn, Chain: set, Rule: "element " + set + " { " + e + " }"}
				if wt.elements[set][e] != dt.elements[set][e] {
					c.add(names.ofElement(set, e), l, wt.elements[set][e])
				} else {
					c.same(names.ofElement(set, e))
				}
			}
		}
	}
	return &Report{Subjects: c.subjects()}, nil
}

func (rs nftRuleset) get(name string) *nftTable {
	if t := rs[name]; t != nil {
		return t
	}
	return &nftTable{chains: map[string][]string{}, sets: map[string][]string{}, elements: map[string]map[string]bool{}}
}

// kube-proxy's nftables names: a per-Service chain or set is PREFIX-HASH-
// ns/name/proto/port, a per-endpoint one adds __IP/PORT.
var (
	nftObject   = regexp.MustCompile(`^[a-z]+-[A-Z0-9]{8}-([^/]+)/([^/]+)/([a-z]+)/([^_/]*)(?:__(.+)/(\d+))?$`)
	nftEndpoint = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+) \. (\d+)`)
	nftGoto     = regexp.MustCompile(`(?:goto|jump) (\S+)`)
	nftComment  = regexp.MustCompile(`comment "([^" ]+/[^" ]+)`)
	numgenMap   = regexp.MustCompile(`mod \d+ map \{.*\}`)
)

// nftSubjects names what a line is about from both rulesets: kube-proxy's
// object names say their Service port and endpoint; addresses in sets say
// theirs through the service-ips map.
type nftSubjects struct {
	// byIP maps a Service address ("10.96.0.10") and endpoint
	// ("10.244.1.2:53") to its Service port.
	byIP map[string]string
}

func nftNames(sides ...nftRuleset) nftSubjects {
	s := nftSubjects{byIP: map[string]string{}}
	for _, rs := range sides {
		for _, t := range rs {
			for e := range t.elements["service-ips"] {
				if m := nftGoto.FindStringSubmatch(e); m != nil {
					if svc, _, ok := nftObjectName(m[1]); ok {
						s.byIP[strings.Fields(e)[0]] = svc
					}
				}
			}
			for ch, rules := range t.chains {
				svc, _, ok := nftObjectName(ch)
				if !ok {
					continue
				}
				for _, r := range rules {
					for _, m := range nftEndpoint.FindAllStringSubmatch(r, -1) {
						s.byIP[m[1]+":"+m[2]] = svc
					}
				}
			}
		}
	}
	return s
}

// nftObjectName is the Service port ("default/web:http") and endpoint
// ("10.244.1.10:8080", or "") an object of kube-proxy's is named for.
func nftObjectName(name string) (svc, ep string, ok bool) {
	m := nftObject.FindStringSubmatch(name)
	if m == nil {
		return "", "", false
	}
	svc = m[1] + "/" + m[2]
	if m[4] != "" {
		svc += ":" + m[4]
	}
	if m[5] != "" {
		ep = m[5] + ":" + m[6]
	}
	return svc, ep, true
}

// of names a rule (or, rule empty, the object itself) of chain or set obj.
func (s nftSubjects) of(obj, rule string) string {
	if svc, ep, ok := nftObjectName(obj); ok {
		if ep != "" {
			return "endpoint " + ep + " of Service " + svc
		}
		return "Service " + svc
	}
	if m := nftGoto.FindStringSubmatch(rule); m != nil {
		if _, _, ok := nftObjectName(m[1]); ok {
			return s.of(m[1], "")
		}
	}
	if m := nftComment.FindStringSubmatch(rule); m != nil {
		return "Service " + strings.TrimSuffix(m[1], ":")
	}
	return "kube-proxy's " + obj
}

// endpoint names endpoint ep ("10.244.1.10:8080") of chain's Service.
func (s nftSubjects) endpoint(chain, ep string) string {
	if svc, _, ok := nftObjectName(chain); ok {
		return "endpoint " + ep + " of Service " + svc
	}
	if svc := s.byIP[ep]; svc != "" {
		return "endpoint " + ep + " of Service " + svc
	}
	return "endpoint " + ep
}

// ofElement names an element of set: a map entry by the chain it jumps to, an
// address by the Service or endpoint it belongs to.
func (s nftSubjects) ofElement(set, e string) string {
	if m := nftGoto.FindStringSubmatch(e); m != nil {
		if _, _, ok := nftObjectName(m[1]); ok {
			return s.of(m[1], "")
		}
	}
	if m := nftComment.FindStringSubmatch(e); m != nil {
		return "Service " + strings.TrimSuffix(m[1], ":")
	}
	f := strings.Fields(e)
	if len(f) > 0 {
		if svc := s.byIP[f[0]]; svc != "" {
			return "Service " + svc
		}
	}
	// The hairpin set: "ip . ip . proto . port" of an endpoint.
	if len(f) >= 7 && f[1] == "." && f[3] == "." && f[5] == "." {
		return s.endpoint("", f[0]+":"+f[6])
	}
	return "kube-proxy's " + set
}

// endpointDiff is the endpoints ("IP:PORT") one of two versions of a rule
// holds and the other does not, true for those only want holds; empty when
// the rules differ otherwise too.
func endpointDiff(want, got string) map[string]bool {
	strip := func(r string) string { return nftEndpoint.ReplaceAllString(r, "EP") }
	eps := func(r string) map[string]bool {
		out := map[string]bool{}
		for _, m := range nftEndpoint.FindAllStringSubmatch(r, -1) {
			out[m[1]+":"+m[2]] = true
		}
		return out
	}
	a, b := eps(want), eps(got)
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	// The rules must be the same but for their endpoints and the map's size
	// and indexes (numgen random mod N map { 0 : EP, 1 : EP }).
	if numgenMap.ReplaceAllString(strip(want), "") != numgenMap.ReplaceAllString(strip(got), "") {
		return nil
	}
	out := map[string]bool{}
	for ep := range a {
		if !b[ep] {
			out[ep] = true
		}
	}
	for ep := range b {
		if !a[ep] {
			out[ep] = false
		}
	}
	return out
}
