// Package compare says where a real node's kube-proxy rules differ from what
// kube-proxy would write for a lab's state (svclab's rendering of that state),
// by Service and endpoint, after normalizing both as the differential check does.
package compare

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/svclab/svclab/lab/differential"
	"github.com/svclab/svclab/lab/proxy/iptables"
)

// Line is one rule, or one chain's declaration (Rule empty), of a table.
type Line struct {
	Table, Chain, Rule string
}

func (l Line) String() string {
	if l.Rule == "" {
		return fmt.Sprintf("%s chain %s", l.Table, l.Chain)
	}
	return l.Table + " " + l.Rule
}

// Subject is what a difference is about: a Service port, one of its endpoints,
// or one of kube-proxy's own chains; Missing are lines kube-proxy would write
// that the node lacks, Extra lines the node has that kube-proxy would not write.
type Subject struct {
	Name           string
	Missing, Extra []Line
	// Same counts the subject's lines that the node holds as kube-proxy
	// would write them.
	Same int
}

// Verdict says in a few words what the difference is.
func (s Subject) Verdict() string {
	endpoint := strings.HasPrefix(s.Name, "endpoint ")
	switch {
	case len(s.Missing) > 0 && s.reordered():
		return "order: the node has these rules, in another order than kube-proxy would write them"
	case len(s.Extra) == 0 && s.Same > 0:
		return fmt.Sprintf("missing: the node lacks %d of the %d rules kube-proxy would write", len(s.Missing), len(s.Missing)+s.Same)
	case len(s.Extra) == 0 && endpoint:
		return "missing: kube-proxy would write its rules, the node has none of them"
	case len(s.Extra) == 0:
		return "missing: kube-proxy would write these rules, the node lacks them"
	case len(s.Missing) == 0 && endpoint:
		return "stale: an endpoint kube-proxy would not write rules for still has them on the node"
	case len(s.Missing) == 0:
		return "stale: the node has rules kube-proxy would not write"
	}
	return "differs: the node's rules are not the ones kube-proxy would write"
}

// reordered tells whether the lines missing and the lines extra are the same
// lines: the node holds every rule, only not in kube-proxy's order.
func (s Subject) reordered() bool {
	if len(s.Missing) != len(s.Extra) {
		return false
	}
	a, b := slices.Clone(s.Missing), slices.Clone(s.Extra)
	byText := func(x, y Line) int { return strings.Compare(x.String(), y.String()) }
	slices.SortFunc(a, byText)
	slices.SortFunc(b, byText)
	return slices.Equal(a, b)
}

// Report is the comparison of one node.
type Report struct {
	Subjects []Subject
}

// Equal tells whether the node holds what kube-proxy would write.
func (r *Report) Equal() bool { return len(r.Subjects) == 0 }

func (r *Report) String() string {
	var b strings.Builder
	for _, s := range r.Subjects {
		fmt.Fprintf(&b, "%s: %s (%d missing, %d extra)\n", s.Name, s.Verdict(), len(s.Missing), len(s.Extra))
		for _, l := range s.Missing {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
		for _, l := range s.Extra {
			fmt.Fprintf(&b, "  + %s\n", l)
		}
	}
	return b.String()
}

// baseChains are the kernel's chains: kube-proxy only jumps from them, among
// other programs' rules, and the order of its jumps there is the order they
// were inserted in, so they are compared as sets.
var baseChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

// kubeChain tells whether a chain is kube-proxy's (or kubelet's, which shares
// the prefix): only those, and jumps to them, are compared; a node's other
// rules (CNI, Docker, firewalls) are not kube-proxy's business.
func kubeChain(c string) bool { return strings.HasPrefix(c, "KUBE-") }

var jumpTarget = regexp.MustCompile(`-j (KUBE-[A-Z0-9-]+)`)

// tables is a dump as compared: per table, declared chains and each chain's
// canonical rules.
type tables map[string]*table

type table struct {
	chains map[string]bool
	rules  map[string][]string
}

// ErrNotADump is the error of input that holds none of what the mode's tools
// print: no iptables-save table, no ipvsadm virtual server, no ipset set.
var ErrNotADump = errors.New("not a dump")

// parseSave reads iptables-save output, with or without counters: the
// kube-proxy part of it, canonical.
func parseSave(text string) (tables, error) {
	var canon strings.Builder
	saw := false
	for n, line := range strings.Split(text, "\n") {
		line = iptables.CutCounters(strings.TrimSpace(line))
		if strings.HasPrefix(line, "*") {
			saw = true
		}
		switch {
		case strings.HasPrefix(line, "-A "):
			chain, rule, err := canonicalRule(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			if kubeChain(chain) || baseChains[chain] && jumpTarget.MatchString(rule) {
				canon.WriteString(rule + "\n")
			}
		case strings.HasPrefix(line, ":"):
			if c, _, _ := strings.Cut(line[1:], " "); kubeChain(c) {
				canon.WriteString(line + "\n")
			}
		case strings.HasPrefix(line, "*"), line == "COMMIT":
			canon.WriteString(line + "\n")
		}
	}
	if !saw {
		return nil, fmt.Errorf("%w: no iptables-save table in it (no line like \"*nat\"; %s)", ErrNotADump, firstLine(text))
	}
	ts := tables{}
	var cur *table
	for _, line := range strings.Split(differential.Normalize([]string{"iptables-save"}, canon.String()), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			name := line[1:]
			if ts[name] == nil {
				ts[name] = &table{chains: map[string]bool{}, rules: map[string][]string{}}
			}
			cur = ts[name]
		case cur == nil:
		case strings.HasPrefix(line, ":"):
			c, _, _ := strings.Cut(line[1:], " ")
			cur.chains[c] = true
		case strings.HasPrefix(line, "-A "):
			c, _, _ := strings.Cut(line[3:], " ")
			cur.rules[c] = append(cur.rules[c], line)
		}
	}
	for _, t := range ts {
		for c := range t.rules {
			if baseChains[c] {
				slices.Sort(t.rules[c])
			}
		}
	}
	return ts, nil
}

var ensured = regexp.MustCompile(`^#\s+-t (\S+) (-[NAI]) (\S+)(?: (.*))?$`)

// AsSaved is what svclab renders for a node in iptables mode (the
// iptables-restore input, and the rules kube-proxy ensures one by one before
// it, listed in its comments) as iptables-save prints a node holding both.
func AsSaved(text string) string {
	type pre struct {
		chains []string
		rules  map[string][]string
	}
	ensuredBy := map[string]*pre{}
	var body strings.Builder
	table := ""
	for _, line := range strings.Split(text, "\n") {
		if m := ensured.FindStringSubmatch(line); m != nil {
			p := ensuredBy[m[1]]
			if p == nil {
				p = &pre{rules: map[string][]string{}}
				ensuredBy[m[1]] = p
			}
			// Each is made unless present (iptables -C, -N's "exists").
			rule := "-A " + m[3] + " " + m[4]
			switch {
			case m[2] == "-N" && !slices.Contains(p.chains, m[3]):
				p.chains = append(p.chains, m[3])
			case m[2] == "-N" || slices.Contains(p.rules[m[3]], rule):
			case m[2] == "-A":
				p.rules[m[3]] = append(p.rules[m[3]], rule)
			case m[2] == "-I":
				p.rules[m[3]] = append([]string{rule}, p.rules[m[3]]...)
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "*") {
			table = line[1:]
			body.WriteString(line + "\n")
			if p := ensuredBy[table]; p != nil {
				for _, c := range p.chains {
					body.WriteString(":" + c + " - [0:0]\n")
				}
				for _, c := range slices.Sorted(maps.Keys(p.rules)) {
					for _, r := range p.rules[c] {
						body.WriteString(r + "\n")
					}
				}
				delete(ensuredBy, table)
			}
			continue
		}
		body.WriteString(line + "\n")
	}
	for _, name := range slices.Sorted(maps.Keys(ensuredBy)) {
		p := ensuredBy[name]
		body.WriteString("*" + name + "\n")
		for _, c := range p.chains {
			body.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range slices.Sorted(maps.Keys(p.rules)) {
			for _, r := range p.rules[c] {
				body.WriteString(r + "\n")
			}
		}
		body.WriteString("COMMIT\n")
	}
	return body.String()
}

// IPTables compares a node's iptables-save output (dump) with what svclab
// renders for it in iptables mode (want).
func IPTables(want, dump string) (*Report, error) {
	w, err := parseSave(AsSaved(want))
	if err != nil {
		return nil, fmt.Errorf("rendered rules: %w", err)
	}
	d, err := parseSave(dump)
	if err != nil {
		return nil, err
	}
	names := subjectNames(w, d)
	c := collector{}
	add := func(l Line, missing bool) { c.add(names.of(l), l, missing) }
	for _, tn := range slices.Sorted(maps.Keys(union(w, d))) {
		wt, dt := w.get(tn), d.get(tn)
		for _, c := range slices.Sorted(maps.Keys(union(wt.chains, dt.chains))) {
			if wt.chains[c] != dt.chains[c] {
				add(Line{Table: tn, Chain: c}, wt.chains[c])
			}
		}
		for _, chain := range slices.Sorted(maps.Keys(union(wt.rules, dt.rules))) {
			a, b := wt.rules[chain], dt.rules[chain]
			for _, op := range difflib.NewMatcher(a, b).GetOpCodes() {
				if op.Tag == 'e' {
					for _, r := range a[op.I1:op.I2] {
						c.same(names.of(Line{Table: tn, Chain: chain, Rule: r}))
					}
					continue
				}
				for _, r := range a[op.I1:op.I2] {
					add(Line{Table: tn, Chain: chain, Rule: r}, true)
				}
				for _, r := range b[op.J1:op.J2] {
					add(Line{Table: tn, Chain: chain, Rule: r}, false)
				}
			}
		}
	}
	return &Report{Subjects: c.subjects()}, nil
}

// collector gathers lines by what they are about.
type collector map[string]*Subject

func (c collector) add(name string, l Line, missing bool) {
	s := c[name]
	if s == nil {
		s = &Subject{Name: name}
		c[name] = s
	}
	if missing {
		s.Missing = append(s.Missing, l)
	} else {
		s.Extra = append(s.Extra, l)
	}
}

// same counts a line of subject name that both sides hold.
func (c collector) same(name string) {
	s := c[name]
	if s == nil {
		s = &Subject{Name: name}
		c[name] = s
	}
	s.Same++
}

// subjects are the subjects that differ, in name order.
func (c collector) subjects() []Subject {
	var out []Subject
	for _, n := range slices.Sorted(maps.Keys(c)) {
		if s := c[n]; len(s.Missing)+len(s.Extra) > 0 {
			out = append(out, *s)
		}
	}
	return out
}

func (ts tables) get(name string) *table {
	if t := ts[name]; t != nil {
		return t
	}
	return &table{chains: map[string]bool{}, rules: map[string][]string{}}
}

func union[K comparable, V any](a, b map[K]V) map[K]bool {
	out := map[K]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// subjects names kube-proxy's per-Service and per-endpoint chains after what
// their rules say (comments naming the Service port, DNAT naming the
// endpoint), on either side.
type subjects struct {
	service  map[string]string // chain -> "ns/name:port"
	endpoint map[string]string // KUBE-SEP chain -> "ip:port"
}

var (
	commentRE = regexp.MustCompile(`--comment "([^" ]+/[^" ]*)`)
	dnatRE    = regexp.MustCompile(`--to-destination (\S+)`)
	// toEndpointRE is the endpoint kube-proxy's comment on a jump to it names
	// ("default/web:http -> 10.244.2.10:8080").
	toEndpointRE = regexp.MustCompile(`--comment "[^"]* -> ([^" ]+)"`)
)

// perService are the prefixes of kube-proxy's chains that belong to one Service
// port (KUBE-XLB was KUBE-SVL's name before 1.24) or one endpoint (KUBE-SEP).
var perService = []string{"KUBE-SVC-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SVL-", "KUBE-XLB-", "KUBE-SEP-"}

func isPerService(c string) bool {
	return slices.ContainsFunc(perService, func(p string) bool { return strings.HasPrefix(c, p) })
}

// The first side names a chain: kube-proxy's chain names are hashes of the
// Service port and endpoint they are for, so what kube-proxy would write
// (want, given first) tells what a chain is, whatever the node's rules in it
// say (a rewritten DNAT is still the chain's endpoint's).
func subjectNames(sides ...tables) subjects {
	s := subjects{service: map[string]string{}, endpoint: map[string]string{}}
	for _, ts := range sides {
		for _, t := range ts {
			for c, rules := range t.rules {
				for _, r := range rules {
					svc := servicePort(r)
					if isPerService(c) && svc != "" && s.service[c] == "" {
						s.service[c] = svc
					}
					if target := jumpTarget.FindStringSubmatch(r); target != nil && isPerService(target[1]) && svc != "" && s.service[target[1]] == "" {
						s.service[target[1]] = svc
					}
					if d := dnatRE.FindStringSubmatch(r); d != nil && strings.HasPrefix(c, "KUBE-SEP-") && s.endpoint[c] == "" {
						s.endpoint[c] = d[1]
					}
				}
			}
		}
	}
	return s
}

// servicePort is the Service port a rule's comment names: "ns/name:port", or
// "ns/name" for an unnamed port (kube-proxy before 1.19 wrote "ns/name:").
func servicePort(rule string) string {
	m := commentRE.FindStringSubmatch(rule)
	if m == nil {
		return ""
	}
	return strings.TrimSuffix(m[1], ":")
}

// of names what a line is about: the endpoint of a KUBE-SEP chain it is in or
// jumps to, else the Service port of a per-Service chain it is in or jumps to,
// else the Service its comment names, else its chain.
func (s subjects) of(l Line) string {
	chains := []string{l.Chain}
	if m := jumpTarget.FindStringSubmatch(l.Rule); m != nil {
		chains = append([]string{m[1]}, chains...)
	}
	for _, c := range chains {
		if strings.HasPrefix(c, "KUBE-SEP-") {
			ep := s.endpoint[c]
			if m := toEndpointRE.FindStringSubmatch(l.Rule); m != nil && c != l.Chain {
				// kube-proxy's comment on a jump to an endpoint names it:
				// the rule is that endpoint's, wherever it jumps.
				ep = m[1]
			}
			if ep == "" {
				ep = "of chain " + c
			}
			// A jump from a Service's own chain is that Service's, even to
			// an endpoint chain of another Service (a wrong jump is filed
			// under the Service whose chain holds it).
			svc := s.service[c]
			if c != l.Chain && isPerService(l.Chain) && s.service[l.Chain] != "" {
				svc = s.service[l.Chain]
			}
			if svc != "" {
				return "endpoint " + ep + " of Service " + svc
			}
			return "endpoint " + ep
		}
	}
	for _, c := range chains {
		if svc := s.service[c]; svc != "" {
			return "Service " + svc
		}
	}
	if svc := servicePort(l.Rule); svc != "" {
		return "Service " + svc
	}
	for _, c := range chains {
		if isPerService(c) {
			return "Service of chain " + c
		}
	}
	return "kube-proxy's chain " + l.Chain
}

// firstLine says what the input starts with, for an error about it.
func firstLine(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 60 {
				l = l[:60] + "..."
			}
			return fmt.Sprintf("it starts %q", l)
		}
	}
	return "it is empty"
}

// Check tells whether dump holds what the mode's tools print of a node
// (ErrNotADump when it holds none of it), before anything is built to
// compare it with.
func Check(mode, dump string) error {
	var err error
	switch mode {
	case "iptables":
		_, err = parseSave(dump)
	case "ipvs":
		if p := splitIPVS(dump); p.ipvsadm == "" && p.ipset == "" && p.iptables == "" {
			err = fmt.Errorf("%w: no `ipvsadm -Ln` or `-Sn`, `ipset save` or iptables-save output in it (%s)", ErrNotADump, firstLine(dump))
		} else if p.iptables != "" {
			_, err = parseSave(p.iptables)
		}
	case "nftables":
		_, err = parseNFT(dump)
	}
	return err
}
