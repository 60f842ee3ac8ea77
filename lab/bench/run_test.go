package bench_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/bench"
	"github.com/svclab/svclab/lab/bench/report"
	"github.com/svclab/svclab/lab/namespaces"
	_ "github.com/svclab/svclab/lab/proxy/iptables" // registers mode "iptables"
	"github.com/svclab/svclab/lab/record"
)

// rootConfig is the quick run on this kernel's iptables, in a lab whose
// namespaces are named svclab-t-bench...-*.
func rootConfig(t *testing.T) bench.Config {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test builds labs of network namespaces and must run as root")
	}
	c := bench.QuickConfig(bench.WhereHost)
	c.Name = "t-bench" + lab.NewRunID()
	c.SetModes([]string{"iptables"})
	return c
}

func leftovers(t *testing.T, name string) {
	t.Helper()
	left, err := namespaces.List(record.NamespacePrefix + name + "-")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
}

// get is every value of one metric of one subject at one size.
func get(rows []bench.Row, s bench.Subject, n, e int, metric string) []float64 {
	var out []float64
	for _, r := range rows {
		if bench.SubjectOf(r) == s && r.Services == n && r.Endpoints == e && r.Metric == metric {
			out = append(out, r.Value)
		}
	}
	return out
}

// The quick run, whole: every iptables method and backend, and the output's
// shape. Timings are never checked.
func TestQuickRun(t *testing.T) {
	c := rootConfig(t)
	rep, log, dir := runChecked(t, c)
	for _, want := range []string{"[1/4] iptables/nft N=20 E=2", "[2/4] iptables/legacy N=20 E=2", "iptables/nft N=200 E=2 done in", "iptables/legacy N=200 E=2 done in", "[4/4]", "done in"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, log.String())
		}
	}
	for _, b := range c.Backends {
		// The first method makes the cold sync; the kernel holds what svclab
		// generated, plus the jumps from the built-in chains.
		first := bench.Subject{Mode: "iptables", Method: c.Methods[0], Backend: b}
		// (Every cold sync of the overhead pairs reports its rules.)
		rules, kernel := get(rep.Rows, first, 200, 2, "cold_rules"), get(rep.Rows, first, 200, 2, "kernel_rules")
		if len(rules) < 1 || len(kernel) != 1 || kernel[0] < rules[0] || kernel[0] > rules[0]+30 {
			t.Errorf("%s: generated %v rules, the kernel holds %v", b, rules, kernel)
		}
		// The iptables proxier offers the bare restore, its parts and its
		// counts: every one is measured.
		for _, m := range []string{"cold_part_generate", "cold_part_write", "cold_part_setup", "cold_own", "cold_restore_bytes", "add_rules_written"} {
			if len(get(rep.Rows, first, 200, 2, m)) == 0 {
				t.Errorf("%s: no %s", first, m)
			}
		}
		if len(get(rep.Rows, first.Bare(), 200, 2, "cold_sync")) == 0 {
			t.Errorf("%s: no bare restore", first)
		}
		// Per-rule counts its calls, unless its first size was estimated
		// past the cap (this machine may be loaded), and a note says so.
		perRule := bench.Subject{Mode: "iptables", Method: "per-rule", Backend: b}
		cut := slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, perRule.String()+" E=2 cut at N=20:") })
		if len(get(rep.Rows, perRule, 20, 2, "cold_commands")) != 1 && !cut {
			t.Errorf("%s: no cold_commands, and no note says why", perRule)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, report.PlotsDir, "add_programming-e2.png")); err != nil {
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
	rep, err := bench.Run(ctx, c)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want it cancelled", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("cancelled run took %s to stop", time.Since(start))
	}
	if rep == nil || len(rep.Rows) == 0 {
		t.Fatal("a cancelled run returned no rows of what it measured")
	}
	// It says so, and names the labs that did not run whole (the one it was
	// in, and the legacy backend's after it).
	if !strings.Contains(rep.Interrupted, "stopped from outside") || !slices.Contains(rep.NotRun, "iptables/nft N=20 E=2") || !slices.Contains(rep.NotRun, "iptables/legacy N=20 E=2") {
		t.Errorf("cancelled run: interrupted %q, not run %v", rep.Interrupted, rep.NotRun)
	}
	leftovers(t, c.Name)
}

// The configuration asks the registry: the modes with a proxier, their
// methods and variants; and it rejects what no measured mode has, naming it.
func TestConfigFromTheRegistry(t *testing.T) {
	c := bench.DefaultConfig(bench.WhereHost)
	if !slices.Contains(c.Modes, "iptables") || !slices.Contains(c.Methods, "per-rule") || !slices.Equal(c.Backends, []string{"nft", "legacy"}) {
		t.Errorf("default host config: modes %v, methods %v, backends %v", c.Modes, c.Methods, c.Backends)
	}
	vm := bench.DefaultConfig(bench.WhereVM)
	if !slices.Equal(vm.Methods, []string{"partial"}) {
		t.Errorf("default VM methods %v, want each mode's default (iptables: partial)", vm.Methods)
	}
	for _, tc := range []struct {
		methods, backends []string
		want              string
	}{
		{[]string{"full", "teleport"}, nil, `method "teleport": no mode measured has it (iptables: partial, full, changed, per-rule)`},
		{[]string{"full"}, []string{"nft", "ebpf"}, `backend "ebpf": no mode measured has it (iptables: nft, legacy)`},
	} {
		c := bench.QuickConfig(bench.WhereHost)
		c.SetModes([]string{"iptables"})
		c.Methods, c.Backends = tc.methods, tc.backends
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate with methods %v, backends %v = %v, want %q", tc.methods, tc.backends, err, tc.want)
		}
	}
	// A mode none of whose methods or variants is listed runs its default.
	c = bench.QuickConfig(bench.WhereHost)
	c.SetModes([]string{"iptables"})
	c.Methods, c.Backends = nil, nil
	subjects, err := c.Subjects()
	if err != nil || !slices.Equal(subjects, []bench.Subject{{Mode: "iptables", Method: "partial", Backend: "nft"}}) {
		t.Errorf("subjects with nothing listed: %v, %v", subjects, err)
	}
}

// runChecked runs c, writes its report and checks the output's shape, and
// returns the report, the run's log and the output directory; leftovers are
// checked at the test's end.
func runChecked(t *testing.T, c bench.Config) (*bench.Report, *strings.Builder, string) {
	t.Helper()
	var log strings.Builder
	c.Log = &log
	rep, err := bench.Run(context.Background(), c)
	t.Cleanup(func() { leftovers(t, c.Name) })
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	dir := t.TempDir()
	if err := report.Write(dir, rep); err != nil {
		t.Fatal(err)
	}
	if err := report.CheckOutput(dir); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	return rep, &log, dir
}
