package iptables

import (
	"slices"
	"strings"
	"testing"
)

// TestTokenizeRule reads every form of a rule either reader of iptables-save
// meets: quoting (escaped quotes, a comment with spaces, dashes or an arrow, an
// empty one), negations of a match and of a match's option, flags, options of
// more than one value, any option order, and iptables-save -c's counters.
func TestTokenizeRule(t *testing.T) {
	for _, c := range []struct {
		line, chain string
		// want is the options, one a string: "! " when negated, the name, then
		// each value in brackets.
		want []string
	}{
		{`-A KUBE-SVC-X ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "default/web:http \"cluster\" IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
			"KUBE-SVC-X", []string{"! -s [10.244.0.0/16]", "-d [10.96.0.1/32]", "-p [tcp]", "-m [comment]", `--comment [default/web:http "cluster" IP]`, "-m [tcp]", "--dport [80]", "-j [KUBE-MARK-MASQ]"}},
		// iptables-save's order of recent's options, with flags among them.
		{`-A KUBE-SVC-X -m comment --comment "a -> b" -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-Y --mask 255.255.255.255 --rsource -j KUBE-SEP-Y`,
			"KUBE-SVC-X", []string{"-m [comment]", "--comment [a -> b]", "-m [recent]", "--rcheck", "--seconds [10800]", "--reap", "--name [KUBE-SEP-Y]", "--mask [255.255.255.255]", "--rsource", "-j [KUBE-SEP-Y]"}},
		// kube-proxy's order of the same options.
		{`-A KUBE-SEP-Y -p tcp -m recent --name KUBE-SEP-Y --set -m tcp -j DNAT --to-destination 10.244.1.10:8080`,
			"KUBE-SEP-Y", []string{"-p [tcp]", "-m [recent]", "--name [KUBE-SEP-Y]", "--set", "-m [tcp]", "-j [DNAT]", "--to-destination [10.244.1.10:8080]"}},
		{`-A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "default/x has no endpoints" -m addrtype --dst-type LOCAL -m tcp --dport 30100 -j REJECT --reject-with icmp-port-unreachable`,
			"KUBE-EXTERNAL-SERVICES", []string{"-p [tcp]", "-m [comment]", "--comment [default/x has no endpoints]", "-m [addrtype]", "--dst-type [LOCAL]", "-m [tcp]", "--dport [30100]", "-j [REJECT]", "--reject-with [icmp-port-unreachable]"}},
		// A negated option of a match; a mark as kube-proxy writes it.
		{`-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN`,
			"KUBE-POSTROUTING", []string{"-m [mark]", "! --mark [0x4000/0x4000]", "-j [RETURN]"}},
		{`-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000`,
			"KUBE-MARK-MASQ", []string{"-j [MARK]", "--or-mark [0x4000]"}},
		{`-A KUBE-SVC-X -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-Z`,
			"KUBE-SVC-X", []string{"-m [statistic]", "--mode [random]", "--probability [0.33333333349]", "-j [KUBE-SEP-Z]"}},
		// An option of two values; a comment that starts with a dash, one
		// without quotes, and an empty one.
		{`-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -m comment --comment "-x" -j ACCEPT`,
			"KUBE-SERVICES", []string{"-m [set]", "--match-set [KUBE-CLUSTER-IP] [dst,dst]", "-m [comment]", "--comment [-x]", "-j [ACCEPT]"}},
		{`-A KUBE-FORWARD -m comment --comment kubernetes -m comment --comment "" -j ACCEPT`,
			"KUBE-FORWARD", []string{"-m [comment]", "--comment [kubernetes]", "-m [comment]", "--comment []", "-j [ACCEPT]"}},
		// iptables-save -c's counters, and tabs.
		{"[12:720] -A KUBE-NODEPORTS\t-p tcp -m tcp --dport 30080 -j KUBE-EXT-X",
			"KUBE-NODEPORTS", []string{"-p [tcp]", "-m [tcp]", "--dport [30080]", "-j [KUBE-EXT-X]"}},
		{`[0:0] -A KUBE-POSTROUTING -j MASQUERADE --random-fully`,
			"KUBE-POSTROUTING", []string{"-j [MASQUERADE]", "--random-fully"}},
	} {
		chain, opts, err := TokenizeRule(c.line)
		if err != nil {
			t.Errorf("%s: %v", c.line, err)
			continue
		}
		var got []string
		for _, o := range opts {
			s := o.Name
			if o.Not {
				s = "! " + s
			}
			for _, v := range o.Values {
				s += " [" + v + "]"
			}
			got = append(got, s)
		}
		if chain != c.chain || !slices.Equal(got, c.want) {
			t.Errorf("%s:\ngot  %s %q\nwant %s %q", c.line, chain, got, c.chain, c.want)
		}
	}
	for _, bad := range []string{
		`-A KUBE-X -m comment --comment "unterminated`,
		`-A KUBE-X -j`,
		`-N KUBE-X`,
		`:KUBE-X - [0:0]`,
		`-A`,
		`[1:2]`,
	} {
		if _, _, err := TokenizeRule(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// TestCutCounters: only "[packets:bytes]" before a rule is cut.
func TestCutCounters(t *testing.T) {
	for in, want := range map[string]string{
		"[12:720] -A X -j Y": "-A X -j Y",
		"[0:0]\t-A X":        "-A X",
		"-A X -j Y":          "-A X -j Y",
		":X - [0:0]":         ":X - [0:0]",
		"[a:b] -A X":         "[a:b] -A X",
		"[12] -A X":          "[12] -A X",
		"[12:720 -A X":       "[12:720 -A X",
	} {
		if got := CutCounters(in); got != want {
			t.Errorf("CutCounters(%q) = %q, want %q", in, got, want)
		}
	}
	if !strings.HasPrefix(CutCounters("[1:1] -A X"), "-A ") {
		t.Error("counters kept")
	}
}
