package lab

import (
	"os/exec"
	"testing"

	"github.com/svclab/svclab/lab/namespaces"
)

// A node between IPVS and its nat rules (KUBE-LOOP-BACK filled, no rule using
// it) is pending; with kube-proxy's masquerade rule in the nat table, or with
// no such set at all, it is not. Real ipset and iptables in a throwaway
// namespace.
func TestHairpinMasqueradePending(t *testing.T) {
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
	if _, err := exec.LookPath("ipset"); err != nil {
		t.Skip("no ipset here")
	}
	if hairpinMasqueradePending(ns) {
		t.Error("no KUBE-LOOP-BACK set: pending")
	}
	run("ipset", "create", "KUBE-LOOP-BACK", "hash:ip,port,ip")
	if hairpinMasqueradePending(ns) {
		t.Error("empty KUBE-LOOP-BACK: pending")
	}
	run("ipset", "add", "KUBE-LOOP-BACK", "10.244.1.10,tcp:8080,10.244.1.10")
	if !hairpinMasqueradePending(ns) {
		t.Error("KUBE-LOOP-BACK with an entry and no rule: not pending")
	}
	run("iptables", "-t", "nat", "-A", "POSTROUTING", "-m", "set", "--match-set", "KUBE-LOOP-BACK", "dst,dst,src", "-j", "MASQUERADE")
	if hairpinMasqueradePending(ns) {
		t.Error("KUBE-LOOP-BACK with its masquerade rule: pending")
	}
}
