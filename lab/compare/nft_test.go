package compare

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// ownNFT is node-1's ruleset in a lab of web.yaml with the real kube-proxy
// 1.37.2 in nftables mode, as `nft -a list ruleset` printed it (handles) and
// as `nft list ruleset` did (plain).
func ownNFT(t *testing.T, form string) string {
	t.Helper()
	file := map[string]string{"handles": "testdata/web-node-1-kube-proxy.nft", "plain": "testdata/web-node-1-kube-proxy-plain.nft"}[form]
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestCompareNFTables: a node's ruleset is equal to itself in either form,
// with counters on its rules and its elements in another order; with one
// endpoint gone from web's Service chain and hairpin set, the report names
// that endpoint alone; another program's table is not compared; and input
// with no nftables table is refused.
func TestCompareNFTables(t *testing.T) {
	// A rule with a counter (kube-proxy writes none; a user's build may), its
	// values as `nft list ruleset` prints them once packets passed; the
	// elements of a set reordered; and a table of another program's.
	want := strings.Replace(ownNFT(t, "plain"), "ct state new jump firewall-check", "ct state new counter packets 0 bytes 0 jump firewall-check", 1)
	varied := strings.Replace(ownNFT(t, "handles"), "ct state new jump firewall-check", "ct state new counter packets 12 bytes 720 jump firewall-check", 1)
	varied = strings.Replace(varied, "elements = { 10.96.0.1, 10.96.0.10,\n\t\t\t     10.96.123.45 }", "elements = { 10.96.123.45, 10.96.0.10, 10.96.0.1 }", 1)
	varied += "table inet firewalld {\n\tchain filter_INPUT {\n\t\ttype filter hook input priority filter + 10; policy accept;\n\t\tct state established,related accept\n\t}\n}\n"
	if varied == ownNFT(t, "handles") {
		t.Fatal("the edits did not apply")
	}
	r, err := NFTables(want, varied)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal() {
		t.Errorf("node-1's own ruleset differs from itself:\n%s", r)
	}

	// Endpoint 10.244.2.10:8080 gone, as kube-proxy writes a Service of one.
	want = ownNFT(t, "plain")
	gone := strings.Replace(want, "dnat ip to numgen random mod 2 map { 0 : 10.244.1.10 . 8080, 1 : 10.244.2.10 . 8080 }", "dnat ip to numgen random mod 1 map { 0 : 10.244.1.10 . 8080 }", 1)
	if gone == want {
		t.Fatal("the endpoint edit did not apply")
	}
	r, err = NFTables(want, gone)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Subjects) != 1 || r.Subjects[0].Name != "endpoint 10.244.2.10:8080 of Service default/web:http" || !strings.HasPrefix(r.Subjects[0].Verdict(), "differs") && !strings.HasPrefix(r.Subjects[0].Verdict(), "missing") {
		t.Errorf("one endpoint gone:\n%s", r)
	}

	// A stale Service: a ClusterIP the node still maps that kube-proxy
	// would not.
	stale := strings.Replace(want, "10.96.0.1 . tcp . 443 : goto service-2QRHZV4L-default/kubernetes/tcp/https,", "10.96.0.1 . tcp . 443 : goto service-2QRHZV4L-default/kubernetes/tcp/https,\n\t\t\t     10.96.0.77 . tcp . 80 : goto service-ABCDEFGH-default/old/tcp/http,", 1)
	r, err = NFTables(want, stale)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Subjects) != 1 || r.Subjects[0].Name != "Service default/old:http" || !strings.HasPrefix(r.Subjects[0].Verdict(), "stale") {
		t.Errorf("a stale Service:\n%s", r)
	}

	for _, in := range []string{"", "*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n", "apiVersion: v1\n"} {
		if _, err := NFTables(want, in); !errors.Is(err, ErrNotADump) {
			t.Errorf("NFTables of %q = %v, want ErrNotADump", in, err)
		}
	}
}
