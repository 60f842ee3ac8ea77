package compare

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svclab/svclab/lab/proxy/iptables"
)

// canonicalRule writes one "-A CHAIN ..." rule so that iptables-restore input
// (as svclab renders kube-proxy's rules) and iptables-save output (as a node
// prints them) of the same rule are the same text: iptables-save reorders a
// rule's options, adds /32 and the implicit -m tcp, prints marks as
// --set-xmark and defaults (REJECT's icmp-port-unreachable, recent's --mask
// and --rsource), and quotes comments its own way. Matches keep no order
// (kube-proxy's matches are independent); each match's options keep theirs.
func canonicalRule(line string) (chain, rule string, err error) {
	chain, opts, err := iptables.TokenizeRule(line)
	if err != nil {
		return "", "", err
	}
	var base, target []string
	modules := map[string][]string{}
	var order []string
	module := func(name string) {
		if _, ok := modules[name]; !ok {
			modules[name] = nil
			order = append(order, name)
		}
	}
	cur := "" // the module options go to; "" before any
	proto := ""
	for _, o := range opts {
		not := ""
		if o.Not {
			not = "! "
		}
		switch o.Name {
		case "-s", "--src", "--source":
			base = append(base, not+"-s "+cidr(o.Value()))
		case "-d", "--dst", "--destination":
			base = append(base, not+"-d "+cidr(o.Value()))
		case "-p", "--protocol":
			proto = strings.ToLower(o.Value())
			base = append(base, not+"-p "+proto)
			cur = "" // options that follow belong to the protocol's match
		case "-i", "--in-interface":
			base = append(base, not+"-i "+o.Value())
		case "-o", "--out-interface":
			base = append(base, not+"-o "+o.Value())
		case "-m", "--match":
			cur = o.Value()
			module(cur)
		case "-j", "--jump", "-g", "--goto":
			target = append(target, "-j "+o.Value())
			target = append(target, o.Values[1:]...)
			cur = "-j"
		default:
			if cur == "" {
				// An option of the protocol's implicit match (-p tcp --dport 80).
				cur = proto
				module(cur)
			}
			if cur == "-j" {
				target = append(target, not+o.Name)
				target = append(target, o.Values...)
			} else {
				modules[cur] = append(modules[cur], not+o.Name)
				modules[cur] = append(modules[cur], o.Values...)
			}
		}
	}
	parts := slices.Clone(base)
	slices.Sort(parts)
	var ms []string
	for _, m := range order {
		ms = append(ms, strings.TrimSpace("-m "+m+" "+strings.Join(canonicalOptions(m, modules[m]), " ")))
	}
	slices.Sort(ms)
	parts = append(parts, ms...)
	parts = append(parts, strings.Join(canonicalTarget(target), " "))
	return chain, "-A " + chain + " " + strings.Join(parts, " "), nil
}

func cidr(s string) string {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.String()
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()).String()
	}
	return s
}

// canonicalOptions are one match's options as iptables-save prints them, with
// its defaults left out.
func canonicalOptions(module string, opts []string) []string {
	var out []string
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		next := func() string {
			if i+1 < len(opts) {
				i++
				return opts[i]
			}
			return ""
		}
		switch {
		case o == "--comment":
			out = append(out, o, strconv.Quote(next()))
		case o == "--probability":
			p, err := strconv.ParseFloat(next(), 64)
			if err != nil {
				out = append(out, o, opts[i])
				continue
			}
			// The kernel keeps 31 bits of it; iptables prints 11 decimals,
			// kube-proxy's input has 10 (older releases more).
			out = append(out, o, strconv.FormatFloat(p, 'f', 5, 64))
		case o == "--mark" || o == "! --mark":
			out = append(out, o, hexPair(next(), "0xffffffff"))
		case module == "recent" && o == "--mask" && i+1 < len(opts) && opts[i+1] == "255.255.255.255":
			i++
		case module == "recent" && o == "--rsource":
		case o == "--destination-port":
			out = append(out, "--dport")
		case o == "--source-port":
			out = append(out, "--sport")
		default:
			out = append(out, o)
		}
	}
	return sortOptions(out)
}

// sortOptions orders a match's options, each with its values, by name: the
// order they were given in means nothing to the kernel, and iptables-save
// prints its own (`-m recent --set --name X` where kube-proxy writes `--name X
// --set`).
func sortOptions(opts []string) []string {
	var groups [][]string
	for _, o := range opts {
		if strings.HasPrefix(o, "--") || strings.HasPrefix(o, "! --") || len(groups) == 0 {
			groups = append(groups, []string{o})
			continue
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], o)
	}
	slices.SortStableFunc(groups, func(a, b []string) int {
		return strings.Compare(strings.TrimPrefix(a[0], "! "), strings.TrimPrefix(b[0], "! "))
	})
	return slices.Concat(groups...)
}

func canonicalTarget(t []string) []string {
	if len(t) == 0 {
		return nil
	}
	switch t[0] {
	case "-j MARK":
		if len(t) == 3 {
			v := hexNum(t[2])
			switch t[1] {
			case "--or-mark":
				return []string{t[0], "--set-xmark", v + "/" + v}
			case "--xor-mark":
				return []string{t[0], "--set-xmark", v + "/0x0"}
			case "--and-mark":
				n, _ := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 32)
				return []string{t[0], "--set-xmark", "0x0/" + fmt.Sprintf("%#x", ^uint32(n))}
			case "--set-mark", "--set-xmark":
				return []string{t[0], "--set-xmark", hexPair(t[2], "0xffffffff")}
			}
		}
	case "-j REJECT":
		if len(t) == 3 && t[1] == "--reject-with" && t[2] == "icmp-port-unreachable" {
			return t[:1]
		}
	}
	return t
}

// hexPair is "value/mask" with both in iptables-save's hex, the mask def when
// not given.
func hexPair(s, def string) string {
	v, m, ok := strings.Cut(s, "/")
	if !ok {
		m = def
	}
	return hexNum(v) + "/" + hexNum(m)
}

func hexNum(s string) string {
	n, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return s
	}
	return fmt.Sprintf("%#x", n)
}
