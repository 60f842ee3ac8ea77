package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `svclab bench --out .` in a checkout once deleted its vm/ folder: bench's
// output directory must be new, empty or its own, and a user's file survives.
func TestBenchRefusesADirectoryOfTheUsers(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "vm", "run.go")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("package vm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := claimBenchOut(dir); err == nil || !strings.Contains(err.Error(), "is not empty and no earlier run wrote it") {
		t.Errorf("claiming a checkout-like directory = %v, want refused", err)
	}
	if b, err := os.ReadFile(src); err != nil || string(b) != "package vm\n" {
		t.Errorf("the user's vm/run.go after the refusal: %q, %v", b, err)
	}
}

// The committed runs (docs/bench, docs/bench-kube-proxy) carry bench's
// manifest listing every file bench writes there, so `svclab bench --out
// docs/bench` rewrites them; a copy is claimed and left with nothing of the
// old run but the files bench does not write.
func TestCommittedBenchOutputsAreItsOwn(t *testing.T) {
	for _, d := range []string{"../../docs/bench", "../../docs/bench-kube-proxy", "../../docs/bench-kube-proxy-10k", "../../docs/bench-kube-proxy-30k", "../../docs/bench-kube-proxy-ipvs-10k", "../../docs/bench-kube-proxy-ipvs-1k"} {
		dir := filepath.Join(t.TempDir(), "out")
		if out, err := exec.Command("cp", "-a", d, dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		out, err := claimBenchOut(dir)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if err := out.Finish(); err != nil {
			t.Fatal(err)
		}
		var left []string
		filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && e.Name() != benchManifest {
				left = append(left, p)
			}
			return err
		})
		if len(left) > 0 {
			t.Errorf("%s: files of the old run not in its manifest: %v", d, left)
		}
	}
}

// A run interrupted before a part recorded anything names that part in the
// combined summary; a part that recorded says itself what it did not run.
func TestInterruptedBenchNamesThePartsNotRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "host"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "host", "results.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	planned := map[string]string{"vm": "every mode in svclab's VM", "host": "iptables natively"}
	if notes := notRunParts(context.Background(), dir, planned); notes != nil {
		t.Errorf("a run not interrupted: %v", notes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	notes := notRunParts(ctx, dir, planned)
	if len(notes) != 1 || !strings.Contains(notes[0], "the vm part (every mode in svclab's VM) did not run") {
		t.Errorf("interrupted: %v", notes)
	}
}

// planBench splits the modes asked for between this kernel and the VM, and
// refuses flags that contradict each other or name no mode.
func TestPlanBench(t *testing.T) {
	for _, f := range []benchFlags{
		{modes: "iptables", proxyImpl: proxySvclab, vmOnly: true, noVM: true},
		{modes: "iptables,nosuch", proxyImpl: proxySvclab},
		{modes: "iptables", proxyImpl: "kube-router"},
		{modes: "iptables", proxyImpl: proxyKubeProxy, kubeProxyModes: "nosuch"},
	} {
		if _, err := planBench(f); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
	// kube-proxy's modes are read only for --proxy kube-proxy.
	if _, err := planBench(benchFlags{modes: "iptables", proxyImpl: proxySvclab, kubeProxyModes: "nosuch"}); err != nil {
		t.Errorf("svclab's proxiers: %v", err)
	}
	// --vm-only: everything in the VM, nothing natively.
	p, err := planBench(benchFlags{modes: "iptables,ipvs", proxyImpl: proxyKubeProxy, kubeProxyModes: "iptables,ipvs", vmOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !p.useVM || len(p.hostModes)+len(p.hostKP) != 0 || len(p.vmKP) != 2 {
		t.Errorf("--vm-only: %+v", p)
	}
	// Otherwise every mode runs natively or is lacking, kube-proxy's too.
	p, err = planBench(benchFlags{modes: "iptables,ipvs,nftables", proxyImpl: proxyKubeProxy, kubeProxyModes: "iptables,ipvs"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.hostModes)+len(p.hostKP)+len(p.lacking) != 5 || p.useVM != (len(p.lacking) > 0) || len(p.hostKP)+len(p.vmKP) != 2 {
		t.Errorf("split: %+v", p)
	}
}
