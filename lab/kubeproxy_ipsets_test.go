package lab

import (
	"os/exec"
	"testing"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/xtables"
)

// A node between IPVS and its rules (a set filled, its rule not written) is
// named; with kube-proxy's rule written, or with no filled set, it is not. A
// rule of another chain that matches the set (KUBE-IPVS-FILTER's, which
// kube-proxy writes at all times) does not count. Real ipset and iptables in a
// throwaway namespace, iptables-nft (kube-proxy's default backend here).
func TestRuleLessIPSet(t *testing.T) {
	if _, err := exec.LookPath("ipset"); err != nil {
		t.Skip("no ipset here")
	}
	if err := xtables.Backends["nft"].Check(); err != nil {
		t.Skipf("no iptables-nft here: %v", err)
	}
	name := "svclab-test-loopback-" + NewRunID()
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
	want := func(set, why string) {
		t.Helper()
		if got := ruleLessIPSet(ns, "nft"); got != set {
			t.Errorf("%s: ruleLessIPSet = %q, want %q", why, got, set)
		}
	}
	ipt := xtables.Backends["nft"].IPTables
	want("", "no sets")
	run("ipset", "create", "KUBE-LOOP-BACK", "hash:ip,port,ip")
	want("", "empty KUBE-LOOP-BACK")
	run("ipset", "add", "KUBE-LOOP-BACK", "10.244.1.10,tcp:8080,10.244.1.10")
	want("KUBE-LOOP-BACK", "KUBE-LOOP-BACK with an entry and no rule")
	run(ipt, "-t", "nat", "-N", "KUBE-POSTROUTING")
	run(ipt, "-t", "nat", "-A", "KUBE-POSTROUTING", "-m", "set", "--match-set", "KUBE-LOOP-BACK", "dst,dst,src", "-j", "MASQUERADE")
	want("", "KUBE-LOOP-BACK with its masquerade rule")

	run("ipset", "create", "KUBE-LOAD-BALANCER", "hash:ip,port")
	run(ipt, "-N", "KUBE-IPVS-FILTER")
	run(ipt, "-A", "KUBE-IPVS-FILTER", "-m", "set", "--match-set", "KUBE-LOAD-BALANCER", "dst,dst", "-j", "RETURN")
	run("ipset", "add", "KUBE-LOAD-BALANCER", "192.168.1.3,tcp:80")
	want("KUBE-LOAD-BALANCER", "KUBE-LOAD-BALANCER with an entry, matched in the filter table only")
	run(ipt, "-t", "nat", "-N", "KUBE-SERVICES")
	run(ipt, "-t", "nat", "-N", "KUBE-LOAD-BALANCER")
	run(ipt, "-t", "nat", "-A", "KUBE-SERVICES", "-m", "set", "--match-set", "KUBE-LOAD-BALANCER", "dst,dst", "-j", "KUBE-LOAD-BALANCER")
	want("", "KUBE-LOAD-BALANCER with its nat rule")
}
