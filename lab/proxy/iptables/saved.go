package iptables

import (
	"fmt"
	"strings"
)

// savedRule is one rule of iptables-save output, reduced to what reading kube-proxy's
// Service chains needs. iptables-save prints matches in a canonical form (both
// backends alike): "-s 10.244.1.10/32", "! -s 10.244.0.0/16", "-p tcp", "-m tcp
// --dport 80", "-m addrtype --src-type LOCAL", comments quoted when they hold a
// space.
type savedRule struct {
	chain string
	// line is the rule as iptables-save printed it, for messages.
	line string
	// src and dst are the -s and -d values, with "!" in front when negated.
	src, dst string
	proto    string
	dport    string
	// srcType and dstType are addrtype's --src-type and --dst-type.
	srcType, dstType string
	// random tells that "-m statistic --mode random" picks the rule for some packets.
	random bool
	// recentCheck is "-m recent --rcheck" (an affinity rule); seconds its --seconds.
	recentCheck bool
	seconds     string
	// other names a match this reader does not know; such a rule applies to some
	// packets only, as far as it can tell.
	other  string
	target string
	// toDestination is DNAT's --to-destination.
	toDestination string
}

// conditional tells whether the rule leaves some packets of a frontend's traffic
// from outside the cluster alone: matches on the source, a random draw, an
// affinity list, or anything unknown.
func (r *savedRule) conditional() bool {
	return r.src != "" || r.srcType != "" || r.random || r.recentCheck || r.other != ""
}

// savedTable is one table of iptables-save output: each chain's rules in order.
type savedTable map[string][]*savedRule

// parseSave reads the output of iptables-save for one table, with or without
// counters.
func parseSave(out []byte) (savedTable, error) {
	t := savedTable{}
	for n, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(CutCounters(line), "-A ") {
			continue
		}
		r, err := parseRule(line)
		if err != nil {
			return nil, fmt.Errorf("iptables-save line %d: %w", n+1, err)
		}
		t[r.chain] = append(t[r.chain], r)
	}
	return t, nil
}

// parseRule reads one "-A CHAIN ..." line.
func parseRule(line string) (*savedRule, error) {
	chain, opts, err := TokenizeRule(line)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, line)
	}
	r := &savedRule{chain: chain, line: line}
	for _, o := range opts {
		val := o.Value()
		if o.Not {
			val = "!" + val
		}
		switch o.Name {
		case "-m", "--comment", "--mode", "--name", "--set", "--reap", "--rsource", "--mask",
			"--nfacct-name", "--random-fully", "--or-mark", "--xor-mark", "--set-xmark", "--reject-with":
			// Modules are named by their options; comments, counters, affinity
			// bookkeeping and target options match every packet.
			if o.Not {
				r.other = o.Name
			}
		case "-s":
			r.src = val
		case "-d":
			r.dst = val
		case "-p":
			r.proto = val
		case "--dport":
			r.dport = val
		case "--src-type":
			r.srcType = val
		case "--dst-type":
			r.dstType = val
		case "--probability":
			r.random = true
		case "--rcheck":
			r.recentCheck = true
		case "--seconds":
			r.seconds = val
		case "-j":
			r.target = val
		case "--to-destination":
			r.toDestination = val
		default:
			// --mark, --ctstate, -i, -o and whatever else: the rule is for some
			// packets only.
			r.other = o.Name
		}
	}
	return r, nil
}

// SavedOption is one option of a rule as iptables-save prints it: "-s
// 10.244.1.10/32", "! --mark 0x4000/0x4000", "-m tcp", "--rcheck",
// "--match-set KUBE-CLUSTER-IP dst,dst".
type SavedOption struct {
	// Name is the option as written: "-s", "-m", "--dport", "-j".
	Name string
	// Not tells that a "!" stood before it.
	Not bool
	// Values are the words after it that are its own: none for a flag.
	Values []string
}

// Value is the option's first value, "" for a flag.
func (o SavedOption) Value() string {
	if len(o.Values) == 0 {
		return ""
	}
	return o.Values[0]
}

// oneValue are the options that take the word after them as their value
// whatever it looks like (a comment may start with a dash); any other word
// that does not start with a dash is a value of the option before it.
var oneValue = map[string]bool{
	"-s": true, "--src": true, "--source": true, "-d": true, "--dst": true, "--destination": true,
	"-p": true, "--protocol": true, "-i": true, "--in-interface": true, "-o": true, "--out-interface": true,
	"-m": true, "--match": true, "-j": true, "--jump": true, "-g": true, "--goto": true,
	"--mode": true, "--name": true, "--comment": true, "--probability": true, "--mark": true,
	"--nfacct-name": true, "--ctstate": true, "--src-type": true, "--dst-type": true, "--to-destination": true,
	"--dport": true, "--sport": true, "--seconds": true, "--or-mark": true, "--xor-mark": true,
	"--set-xmark": true, "--mask": true, "--reject-with": true, "--physdev-in": true, "--physdev-out": true,
	"--match-set": true,
}

// TokenizeRule splits one rule of iptables-save output, "-A CHAIN ..." with or
// without the "[packets:bytes] " iptables-save -c prints before it, into its
// chain and its options in the order written. A word in double quotes
// (iptables-save quotes comments with spaces) may hold spaces and
// backslash-escaped characters. Values are slices of line, not copies: a save
// of thousands of Services has hundreds of thousands of words.
func TokenizeRule(line string) (chain string, opts []SavedOption, err error) {
	words, err := splitWords(CutCounters(line))
	if err != nil {
		return "", nil, err
	}
	opts = make([]SavedOption, 0, len(words)/2)
	not := false
	for i := 2; i < len(words); i++ {
		w := words[i]
		if w == "!" {
			not = true
			continue
		}
		j := i + 1
		if oneValue[w] {
			if j >= len(words) {
				return "", nil, fmt.Errorf("%s without a value", w)
			}
			j++
		}
		for j < len(words) && words[j] != "!" && !strings.HasPrefix(words[j], "-") {
			j++
		}
		opts = append(opts, SavedOption{Name: w, Not: not, Values: words[i+1 : j : j]})
		not = false
		i = j - 1
	}
	return words[1], opts, nil
}

// CutCounters is line without the "[packets:bytes] " that iptables-save -c
// prints before a rule.
func CutCounters(line string) string {
	if !strings.HasPrefix(line, "[") {
		return line
	}
	end := strings.Index(line, "]")
	if end < 0 || !isCounters(line[1:end]) {
		return line
	}
	return strings.TrimLeft(line[end+1:], " \t")
}

// isCounters tells whether s is "packets:bytes".
func isCounters(s string) bool {
	p, b, ok := strings.Cut(s, ":")
	return ok && isDigits(p) && isDigits(b)
}

func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// splitWords splits an iptables-save rule line into words.
func splitWords(line string) ([]string, error) {
	words := make([]string, 0, 24)
	for i := 0; i < len(line); {
		switch line[i] {
		case ' ', '\t':
			i++
			continue
		case '"':
			j, escaped := i+1, false
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' {
					escaped = true
					j++
				}
			}
			if j >= len(line) {
				return nil, fmt.Errorf("unterminated quote")
			}
			w := line[i+1 : j]
			if escaped {
				w = unescape(w)
			}
			words = append(words, w)
			i = j + 1
			continue
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		words = append(words, line[i:j])
		i = j
	}
	if len(words) < 2 || words[0] != "-A" {
		return nil, fmt.Errorf("not an -A rule")
	}
	return words, nil
}

// unescape drops the backslashes of a quoted word.
func unescape(w string) string {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		if w[i] == '\\' && i+1 < len(w) {
			i++
		}
		b.WriteByte(w[i])
	}
	return b.String()
}
