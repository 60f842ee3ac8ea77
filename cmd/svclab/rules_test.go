package main

import (
	"bytes"
	"strings"
	"testing"
)

func rules(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newRulesCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("svclab rules %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

// Seed 002 came from a node running kube-proxy older than 1.19: its chains and
// comments carry the unnamed port's trailing colon. The article misprints two SEP
// names (JPXQHLXQSDHS2NX, 5H6K0BYUZ646ISHJ); these are the hashes kube-proxy computes.
func TestRulesReproduceSeed002(t *testing.T) {
	old := rules(t, "-f", "../../topologies/httpd.yaml", "--node", "node1", "--kube-proxy-version", "1.18")
	for _, want := range []string{
		// kube-proxy's iptables-restore input; specs/seeds_test.go checks the
		// kernel's own iptables-save of the same rules against the seed.
		`-A KUBE-SERVICES -m comment --comment "default/service-httpd: cluster IP" -m tcp -p tcp -d 10.101.20.80/32 --dport 8080 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ`,
		`-A KUBE-SERVICES -m comment --comment "default/service-httpd: cluster IP" -m tcp -p tcp -d 10.101.20.80/32 --dport 8080 -j KUBE-SVC-5FEAUJNCXGRSJFN5`,
		`-A KUBE-SVC-5FEAUJNCXGRSJFN5 -m comment --comment default/service-httpd: -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-KIILMGZB3LCHX6UB`,
		`-A KUBE-SVC-5FEAUJNCXGRSJFN5 -m comment --comment default/service-httpd: -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-JPXOQHLXQSDHS2NX`,
		`-A KUBE-SVC-5FEAUJNCXGRSJFN5 -m comment --comment default/service-httpd: -j KUBE-SEP-5H6KOBYUZ646ISHJ`,
		`-A KUBE-SEP-KIILMGZB3LCHX6UB -m comment --comment default/service-httpd: -s 10.244.1.27/32 -j KUBE-MARK-MASQ`,
		`-A KUBE-NODEPORTS -m comment --comment default/service-httpd: -m tcp -p tcp --dport 32000 -j KUBE-SVC-5FEAUJNCXGRSJFN5`,
	} {
		if !strings.Contains(old, want) {
			t.Errorf("kube-proxy 1.18 rules lack %q", want)
		}
	}
	cur := rules(t, "-f", "../../topologies/httpd.yaml", "--node", "node1")
	if strings.Contains(cur, "KUBE-SVC-5FEAUJNCXGRSJFN5") || !strings.Contains(cur, `"default/service-httpd cluster IP"`) {
		t.Errorf("current kube-proxy names the unnamed port without the colon:\n%s", cur)
	}
}
