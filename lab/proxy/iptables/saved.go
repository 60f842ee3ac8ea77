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

// valueOptions are the options iptables-save prints with a value after them.
var valueOptions = map[string]bool{
	"-m": true, "--mode": true, "--name": true, "--comment": true, "--probability": true, "--mark": true,
	"--nfacct-name": true, "--ctstate": true, "--src-type": true, "--dst-type": true, "--to-destination": true,
	"-s": true, "-d": true, "-p": true, "--dport": true, "--sport": true, "--seconds": true, "-j": true,
	"-i": true, "-o": true, "--or-mark": true, "--xor-mark": true, "--set-xmark": true, "--mask": true,
	"--reject-with": true, "--physdev-in": true, "--physdev-out": true, "--match-set": true,
}

// parseSave reads the output of iptables-save for one table.
func parseSave(out []byte) (savedTable, error) {
	t := savedTable{}
	for n, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "-A ") {
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
	words, err := SplitWords(line)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, line)
	}
	r := &savedRule{chain: words[1], line: line}
	negate := false
	for i := 2; i < len(words); i++ {
		w := words[i]
		if w == "!" {
			negate = true
			continue
		}
		val := ""
		if valueOptions[w] {
			if i+1 >= len(words) {
				return nil, fmt.Errorf("%s without a value: %s", w, line)
			}
			i++
			val = words[i]
		}
		if negate {
			val = "!" + val
		}
		switch w {
		case "-m", "--comment", "--mode", "--name", "--set", "--reap", "--rsource", "--mask",
			"--nfacct-name", "--random-fully", "--or-mark", "--xor-mark", "--set-xmark", "--reject-with":
			// Modules are named by their options; comments, counters, affinity
			// bookkeeping and target options match every packet.
			if negate {
				r.other = w
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
			r.other = w
		}
		negate = false
	}
	return r, nil
}

// SplitWords splits an iptables-save line into words: a word in double quotes
// (iptables-save quotes comments with spaces) may hold spaces and
// backslash-escaped characters. Words are slices of line, not copies: a save of
// thousands of Services has hundreds of thousands of words.
func SplitWords(line string) ([]string, error) {
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
