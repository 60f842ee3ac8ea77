package compare

import (
	"maps"
	"slices"
	"testing"
)

// TestCanonicalRule: a rule as kube-proxy writes it (iptables-restore input)
// and as iptables-save prints it back are one canonical rule; a rule that
// means something else is not. The words of each line are
// iptables.TokenizeRule's (tested there); this is what compare makes of them.
func TestCanonicalRule(t *testing.T) {
	for _, c := range []struct{ written, saved string }{
		// recent's options in either order, its defaults left out or printed.
		{`-A KUBE-SEP-Y -p tcp -m comment --comment "default/web:http" -m recent --name KUBE-SEP-Y --set -m tcp -j DNAT --to-destination 10.244.1.10:8080`,
			`-A KUBE-SEP-Y -p tcp -m comment --comment default/web:http -m recent --set --name KUBE-SEP-Y --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.244.1.10:8080`},
		// Matches in any order; /32 and the implicit -m tcp added.
		{`-A KUBE-SERVICES -m comment --comment "default/web:http cluster IP" -m tcp -p tcp -d 10.96.0.1 --dport 80 -j KUBE-SVC-X`,
			`-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-X`},
		{`-A KUBE-NODEPORTS -p tcp --destination-port 30080 -j KUBE-EXT-X`,
			`-A KUBE-NODEPORTS -p tcp -m tcp --dport 30080 -j KUBE-EXT-X`},
		// Marks as --set-xmark, a negated one with its mask.
		{`-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000`, `-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000`},
		{`-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN`, `-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN`},
		{`-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000`, `-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0`},
		// Probabilities to the kernel's precision; REJECT's default.
		{`-A KUBE-SVC-X -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-Z`,
			`-A KUBE-SVC-X -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-Z`},
		{`-A KUBE-SERVICES -d 10.96.0.77/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable`,
			`-A KUBE-SERVICES -d 10.96.0.77/32 -p tcp -m tcp --dport 80 -j REJECT`},
		// A comment with escaped quotes.
		{`-A KUBE-SVC-X -m comment --comment "a \"b\" c" -j KUBE-SEP-Z`, `-A KUBE-SVC-X -m comment --comment "a \"b\" c" -j KUBE-SEP-Z`},
	} {
		_, w, err := canonicalRule(c.written)
		if err != nil {
			t.Fatal(err)
		}
		_, s, err := canonicalRule(c.saved)
		if err != nil {
			t.Fatal(err)
		}
		if w != s {
			t.Errorf("one rule, two canonical forms:\n%s\n%s", w, s)
		}
	}
	for _, c := range []struct{ a, b string }{
		{`-A KUBE-SVC-X ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ`, `-A KUBE-SVC-X -s 10.244.0.0/16 -j KUBE-MARK-MASQ`},
		{`-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN`, `-A KUBE-POSTROUTING -m mark --mark 0x4000/0x4000 -j RETURN`},
		{`-A KUBE-SEP-Y -p tcp -m tcp -j DNAT --to-destination 10.244.1.10:8080`, `-A KUBE-SEP-Y -p tcp -m tcp -j DNAT --to-destination 10.244.9.9:8080`},
	} {
		_, a, _ := canonicalRule(c.a)
		_, b, _ := canonicalRule(c.b)
		if a == b {
			t.Errorf("two rules, one canonical form: %s", a)
		}
	}
}

// TestParseSaveCounters: iptables-save -c's output reads as iptables-save's.
func TestParseSaveCounters(t *testing.T) {
	plain := "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X\nCOMMIT\n"
	counted := "*nat\n:KUBE-SERVICES - [0:0]\n[12:720] -A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X\nCOMMIT\n"
	p, err := parseSave(plain)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseSave(counted)
	if err != nil {
		t.Fatal(err)
	}
	if len(p["nat"].rules["KUBE-SERVICES"]) != 1 || !maps.EqualFunc(p["nat"].rules, c["nat"].rules, slices.Equal) {
		t.Errorf("without counters %v, with %v", p["nat"].rules, c["nat"].rules)
	}
}
