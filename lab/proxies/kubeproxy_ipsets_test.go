package proxies

import (
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// A node inside kube-proxy's IPVS sync is named: an address IPVS serves that
// no admitted set holds yet, or a set filled before its rule; once the sets
// and rules are written, or with no sets, nothing is. A rule of another chain
// that matches the set (KUBE-IPVS-FILTER's, which kube-proxy writes at all
// times) does not count. Real ipset and iptables in a throwaway namespace,
// iptables-nft (kube-proxy's default backend here).
func TestIPVSSyncPending(t *testing.T) {
	if _, err := exec.LookPath("ipset"); err != nil {
		t.Skip("no ipset here")
	}
	if err := xtables.Backends["nft"].Check(); err != nil {
		t.Skipf("no iptables-nft here: %v", err)
	}
	name := "svclab-test-ipvssync-" + strconv.Itoa(os.Getpid())
	if err := namespaces.Create(name); err != nil {
		t.Skipf("cannot create a network namespace: %v", err)
	}
	defer namespaces.Delete(name)
	ns, err := namespaces.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	run := func(argv ...string) {
		t.Helper()
		if out, err := ns.Output(argv...); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	got := proxy.ServiceMap{}
	want := func(pending bool, why string) {
		t.Helper()
		if msg := ipvsSyncPending(ns, "nft", got); (msg != "") != pending {
			t.Errorf("%s: ipvsSyncPending = %q, want pending %v", why, msg, pending)
		}
	}
	ipt := xtables.Backends["nft"].IPTables
	want(false, "no sets, no frontends")

	run("ipset", "create", "KUBE-LOOP-BACK", "hash:ip,port,ip")
	want(false, "empty KUBE-LOOP-BACK")
	run("ipset", "add", "KUBE-LOOP-BACK", "10.244.1.10,tcp:8080,10.244.1.10")
	want(true, "KUBE-LOOP-BACK with an entry and no rule")
	run(ipt, "-t", "nat", "-N", "KUBE-POSTROUTING")
	run(ipt, "-t", "nat", "-A", "KUBE-POSTROUTING", "-m", "set", "--match-set", "KUBE-LOOP-BACK", "dst,dst,src", "-j", "MASQUERADE")
	want(false, "KUBE-LOOP-BACK with its masquerade rule")

	got[proxy.ClusterIPFrontend("TCP", netip.MustParseAddr("192.168.1.3"), 80)] = proxy.Forwarding{}
	got[proxy.NodePortFrontend("TCP", 30080)] = proxy.Forwarding{}
	run("ipset", "create", "KUBE-LOAD-BALANCER", "hash:ip,port")
	run(ipt, "-N", "KUBE-IPVS-FILTER")
	run(ipt, "-A", "KUBE-IPVS-FILTER", "-m", "set", "--match-set", "KUBE-LOAD-BALANCER", "dst,dst", "-j", "RETURN")
	want(true, "IPVS serves 192.168.1.3:80, no admitted set holds it")
	run("ipset", "add", "KUBE-LOAD-BALANCER", "192.168.1.3,tcp:80")
	want(true, "KUBE-LOAD-BALANCER with the entry, matched in the filter table only")
	run(ipt, "-t", "nat", "-N", "KUBE-SERVICES")
	run(ipt, "-t", "nat", "-N", "KUBE-LOAD-BALANCER")
	run(ipt, "-t", "nat", "-A", "KUBE-SERVICES", "-m", "set", "--match-set", "KUBE-LOAD-BALANCER", "dst,dst", "-j", "KUBE-LOAD-BALANCER")
	want(false, "KUBE-LOAD-BALANCER with its entry and its nat rule (a NodePort needs no admitted set)")
}
