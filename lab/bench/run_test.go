package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	_ "github.com/svclab/svclab/lab/proxy/iptables" // registers mode "iptables"
)

// rootConfig is the quick run on this kernel's iptables, in a lab whose
// namespaces are named svclab-t-bench...-*.
func rootConfig(t *testing.T) Config {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test builds labs of network namespaces and must run as root")
	}
	c := QuickConfig(WhereHost)
	c.Name = "t-bench" + lab.NewRunID()
	c.Modes = []string{"iptables"}
	return c
}

func leftovers(t *testing.T, name string) {
	t.Helper()
	left, err := namespaces.List(lab.NamespacePrefix + name + "-")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
}

// The quick run, whole: every iptables method and backend, and the output's
// shape. Timings are never checked.
func TestQuickRun(t *testing.T) {
	c := rootConfig(t)
	var log strings.Builder
	c.Log = &log
	rep, err := Run(context.Background(), c)
	defer leftovers(t, c.Name)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	dir := t.TempDir()
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	if err := CheckOutput(dir); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, want := range []string{"[1/4] iptables/nft N=20 E=2", "[2/4] iptables/legacy N=20 E=2", "iptables/nft N=200 E=2 done in", "iptables/legacy N=200 E=2 done in", "[4/4]", "done in"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, log.String())
		}
	}
	// The kernel holds what svclab generated, plus the jumps from the built-in
	// chains.
	sr := newSeries(rep.Rows)
	for _, b := range c.Backends {
		s := subject{"iptables", MethodFull, b}
		rules, kernel := sr.get(s, 200, 2, "rules"), sr.get(s, 200, 2, "kernel_rules")
		if len(rules) != 1 || len(kernel) != 1 || kernel[0] < rules[0] || kernel[0] > rules[0]+30 {
			t.Errorf("%s: generated %v rules, the kernel holds %v", b, rules, kernel)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, PlotsDir, "add_programming-e2.png")); err != nil {
		t.Error(err)
	}
}

// Cancelling a run (Ctrl-C) stops it and leaves nothing behind.
func TestCancelledRunLeavesNothing(t *testing.T) {
	c := rootConfig(t)
	c.Services = []int{20}
	c.Reps, c.CellBudget = 1000, 0
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(3*time.Second, cancel)
	start := time.Now()
	rep, err := Run(ctx, c)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want it cancelled", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("cancelled run took %s to stop", time.Since(start))
	}
	if rep == nil || len(rep.Rows) == 0 {
		t.Error("a cancelled run returned no rows of what it measured")
	}
	leftovers(t, c.Name)
}
