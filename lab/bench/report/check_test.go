package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/bench"
	_ "github.com/svclab/svclab/lab/proxy/iptables" // registers mode "iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"     // registers mode "ipvs"
)

// fakeReport is a report of the shape Run writes for c, with made-up values:
// the checker's input, without the root and minutes a real run needs (the
// root test in lab/bench checks a real one). The iptables mode's rows have a
// bare apply beside the cold sync, as its proxier offers one.
func fakeReport(t *testing.T, c bench.Config) *bench.Report {
	t.Helper()
	measured, err := c.Measured()
	if err != nil {
		t.Fatal(err)
	}
	var rows []bench.Row
	add := func(s bench.Subject, n, e int, metric string, k int, unit string) {
		for i := 0; i < k; i++ {
			rows = append(rows, bench.Row{Mode: s.Mode, Method: s.Method, Backend: s.Backend, Services: n, Endpoints: e,
				Metric: metric, Rep: i, Value: 1e-3 * float64(n) * float64(i+1), Unit: unit})
		}
	}
	count := func(s bench.Subject, n, e int, metric string, v int) {
		rows = append(rows, bench.Row{Mode: s.Mode, Method: s.Method, Backend: s.Backend, Services: n, Endpoints: e,
			Metric: metric, Value: float64(v), Unit: bench.UnitCount})
	}
	syncs := func(s bench.Subject, n, e int, phase string, k int) {
		add(s, n, e, phase+"_sync", k, bench.UnitSeconds)
		add(s, n, e, phase+"_part_write", k, bench.UnitSeconds)
		add(s, n, e, phase+"_part_setup", k, bench.UnitSeconds)
		add(s, n, e, phase+"_own", k, bench.UnitSeconds)
		add(s, n, e, phase+"_restore_bytes", k, bench.UnitBytes)
	}
	updates := func(s bench.Subject, n, e int) {
		for _, ph := range []string{"change", "add"} {
			syncs(s, n, e, ph, c.Reps)
			add(s, n, e, ph+"_rules_written", c.Reps, bench.UnitCount)
			add(s, n, e, ph+"_programming", c.Reps, bench.UnitSeconds)
			add(s, n, e, ph+"_poll_interval", c.Reps, bench.UnitSeconds)
		}
	}
	for _, e := range c.Endpoints {
		for _, n := range c.Services {
			for _, me := range measured {
				for _, v := range me.Variants {
					first := true
					for _, m := range me.Methods {
						s := bench.Subject{Mode: me.Mode.Name, Method: m, Backend: v.Name}
						updates(s, n, e)
						switch {
						case me.Mode.WritesPerRule(m):
							syncs(s, n, e, "cold", 1)
							continue
						case !first:
							syncs(s, n, e, "restart", 1)
							continue
						}
						first = false
						syncs(s, n, e, "cold", 1)
						for _, m := range []string{"connect_baseline", "connect_first", "connect_last", "connect_pod"} {
							add(s, n, e, m, c.Connects, bench.UnitSeconds)
						}
						rows = append(rows, bench.Row{Mode: s.Mode, Method: s.Method, Backend: s.Backend, Services: n, Endpoints: e,
							Metric: "kernel_memory", Value: 4096, Unit: bench.UnitBytes})
						if me.Mode.Name == "ipvs" {
							for metric, v := range map[string]int{"virtual_servers": n, "real_servers": n * e} {
								count(s, n, e, "cold_"+metric, v)
								count(s, n, e, "kernel_"+metric, v)
							}
							continue
						}
						count(s, n, e, "cold_rules", (2+3*e)*n)
						count(s, n, e, "kernel_rules", (2+3*e)*n+14)
						add(s.Bare(), n, e, "cold_sync", 1, bench.UnitSeconds)
					}
				}
			}
		}
	}
	return &bench.Report{Config: c, Rows: rows, Started: time.Now(), Elapsed: time.Minute,
		Machine: bench.Machine{Where: bench.WhereHost, Kernel: "6.18", CPU: "test CPU", CPUs: 2}}
}

func testConfig() bench.Config {
	c := bench.QuickConfig(bench.WhereHost)
	c.Modes = []string{"iptables", "ipvs"}
	c.Methods = []string{"full", "partial", "per-rule"}
	c.Backends = []string{"nft"}
	return c
}

func writeReport(t *testing.T, r *bench.Report) string {
	t.Helper()
	dir := t.TempDir()
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckOutputAcceptsAWholeReport(t *testing.T) {
	dir := writeReport(t, fakeReport(t, testConfig()))
	if err := CheckOutput(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ResultsFile, SummaryFile, MachineFile, "plots/cold_sync-e2.png", "plots/connect-e2.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestCheckOutputRejects(t *testing.T) {
	drop := func(match func(bench.Row) bool) func(*bench.Report) {
		return func(r *bench.Report) { r.Rows = slices.DeleteFunc(r.Rows, match) }
	}
	set := func(metric string, v float64) func(*bench.Report) {
		return func(r *bench.Report) {
			for i := range r.Rows {
				if r.Rows[i].Metric == metric {
					r.Rows[i].Value = v
				}
			}
		}
	}
	for name, tc := range map[string]struct {
		change func(*bench.Report)
		after  func(dir string)
		want   string
	}{
		"a cell without latencies": {
			change: drop(func(r bench.Row) bool {
				return r.Method == "partial" && r.Services == 200 && r.Metric == "add_programming"
			}),
			want: "0 add outcomes for 3 syncs",
		},
		"too few repetitions": {
			change: drop(func(r bench.Row) bool {
				return r.Mode == "ipvs" && r.Services == 20 && r.Metric == "change_sync" && r.Rep > 0
			}),
			want: "1 change_sync, want at least 2",
		},
		"a size missing": {
			change: drop(func(r bench.Row) bool { return r.Mode == "ipvs" && r.Services == 200 }),
			want:   "ipvs/netlink N=200 E=2: no cold_sync",
		},
		"a bare apply missing at one size": {
			change: drop(func(r bench.Row) bool { return r.Method == bench.BareMethod && r.Services == 20 }),
			want:   "iptables/bare-restore/nft N=20 E=2: no cold_sync",
		},
		"a part missing at one size": {
			change: drop(func(r bench.Row) bool { return r.Metric == "add_part_write" && r.Services == 200 && r.Method == "full" }),
			want:   "iptables/full/nft N=200 E=2: no add_part_write, which other sizes have",
		},
		"a kernel count missing at one size": {
			change: drop(func(r bench.Row) bool { return r.Metric == "kernel_real_servers" && r.Services == 20 }),
			want:   "ipvs/netlink N=20 E=2: no kernel_real_servers",
		},
		"an unknown metric": {
			change: func(r *bench.Report) {
				r.Rows = append(r.Rows, bench.Row{Mode: "ipvs", Method: "netlink", Services: 20, Endpoints: 2, Metric: "mystery", Unit: bench.UnitSeconds})
			},
			want: `unknown metric "mystery"`,
		},
		"an empty IPVS table": {
			change: set("kernel_virtual_servers", 0),
			want:   "the kernel holds 0 virtual_servers",
		},
		"fewer rules in the kernel than generated": {
			change: set("kernel_rules", 1),
			want:   "kernel_rules is 1, want at least",
		},
		"a method no mode has": {
			change: func(r *bench.Report) { r.Config.Methods = append(r.Config.Methods, "teleport") },
			want:   `method "teleport" is no measured mode's`,
		},
		"an unknown mode": {
			change: func(r *bench.Report) { r.Config.Modes = append(r.Config.Modes, "carrier-pigeon") },
			want:   `unknown proxy mode "carrier-pigeon"`,
		},
		"a wrong unit": {
			change: func(r *bench.Report) { r.Rows[0].Unit = bench.UnitBytes },
			want:   "unit",
		},
		"no machine": {
			change: func(r *bench.Report) { r.Machine.Kernel = "" },
			want:   "kernel, CPU or CPU count missing",
		},
		"a broken plot": {
			after: func(dir string) {
				os.WriteFile(filepath.Join(dir, PlotsDir, "add_sync-e2.png"), []byte("not a png"), 0o644)
			},
			want: "add_sync-e2.png",
		},
		"a missing plot": {
			after: func(dir string) { os.Remove(filepath.Join(dir, PlotsDir, "connect-e2.png")) },
			want:  "no plot",
		},
		"a summary without its sections": {
			after: func(dir string) { os.WriteFile(filepath.Join(dir, SummaryFile), []byte("# nothing\n"), 0o644) },
			want:  `no section "Targets"`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := fakeReport(t, testConfig())
			if tc.change != nil {
				tc.change(r)
			}
			dir := writeReport(t, r)
			if tc.after != nil {
				tc.after(dir)
			}
			err := CheckOutput(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckOutput = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// A curve cut at a size, with the note saying so, is complete; without the
// note it is not.
func TestCheckOutputAcceptsNotedCuts(t *testing.T) {
	r := fakeReport(t, testConfig())
	r.Rows = slices.DeleteFunc(r.Rows, func(r bench.Row) bool { return r.Method == "partial" && r.Services == 200 })
	dir := writeReport(t, r)
	if err := CheckOutput(dir); err == nil {
		t.Fatal("a missing cell without a note passed")
	}
	r.Notes = append(r.Notes, "iptables/partial/nft E=2 cut at N=200: the run's time budget (1s) was spent")
	dir = writeReport(t, r)
	if err := CheckOutput(dir); err != nil {
		t.Fatal(err)
	}
	// A cut at a larger size does not excuse a smaller one.
	r.Notes = []string{"iptables/partial/nft E=2 cut at N=2000: no"}
	dir = writeReport(t, r)
	if err := CheckOutput(dir); err == nil {
		t.Fatal("a cut above the missing size excused it")
	}
}

// An update of a method that writes rule by rule may be left out where a note
// says its repetition was estimated too long; only that update.
func TestCheckOutputAcceptsAnUpdateNotRun(t *testing.T) {
	r := fakeReport(t, testConfig())
	r.Rows = slices.DeleteFunc(r.Rows, func(r bench.Row) bool {
		return r.Method == "per-rule" && r.Services == 200 && strings.HasPrefix(r.Metric, "add_")
	})
	for _, c := range []struct {
		note string
		ok   bool
	}{
		{"", false},
		{"iptables/per-rule/nft N=200 E=2 change: not run: a repetition would take about 9s (cap 5s)", false},
		{"iptables/per-rule/nft N=200 E=2 add: not run: a repetition would take about 9s (cap 5s)", true},
		// As the bench wrote it before.
		{"iptables/per-rule/nft N=200 E=2: add-one not run: about 230 iptables calls at 40ms each predict 9s a repetition (cap 5s)", true},
	} {
		r.Notes = nil
		if c.note != "" {
			r.Notes = []string{c.note}
		}
		if err := CheckOutput(writeReport(t, r)); (err == nil) != c.ok {
			t.Errorf("note %q: CheckOutput = %v, want ok %v", c.note, err, c.ok)
		}
	}
}

func TestPublish(t *testing.T) {
	dir := t.TempDir()
	host := fakeReport(t, testConfig())
	vm := fakeReport(t, testConfig())
	vm.Machine.Where = bench.WhereVM
	for name, r := range map[string]*bench.Report{bench.WhereHost: host, bench.WhereVM: vm} {
		if err := WriteRecord(filepath.Join(dir, name), r); err != nil {
			t.Fatal(err)
		}
		if err := CheckRecord(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckOutput(dir); err == nil {
		t.Fatal("CheckOutput passed parts with nothing drawn")
	}
	if err := Publish(dir, "svclab bench --test"); err != nil {
		t.Fatal(err)
	}
	if err := CheckOutput(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(vm/summary.md)", "(host/summary.md)", "](vm/plots/cold_sync-e2.png)", "](host/plots/cold_sync-e2.png)", "`svclab bench --test`"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("combined summary lacks %q", want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), []byte("# svclab bench\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckOutput(dir); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("does not link %s", "vm/summary.md")) {
		t.Errorf("CheckOutput of a combined summary without links = %v", err)
	}
}

// Too few repetitions of an update are excused by the note on that update's
// phase only: a note on another phase, or on one failed repetition, is not.
func TestCheckOutputExcusesOnlyWhatTheNoteSays(t *testing.T) {
	r := fakeReport(t, testConfig())
	ipvs := bench.Subject{Mode: "ipvs", Method: "netlink"}
	// The first change repetition stays, its sync and its programming latency.
	r.Rows = slices.DeleteFunc(r.Rows, func(row bench.Row) bool {
		return row.Mode == "ipvs" && row.Services == 20 && row.Endpoints == 2 &&
			strings.HasPrefix(row.Metric, "change_") && row.Rep > 0
	})
	for _, c := range []struct {
		note string
		ok   bool
	}{
		{"", false},
		{ipvs.String() + " N=20 E=2 add repetition 1: connection refused", false},
		{ipvs.String() + " N=20 E=2 add: 1 of 3 repetitions (one takes 9s; cell budget 2s)", false},
		{ipvs.String() + " N=20 E=2 change: 1 of 3 repetitions (one takes 9s; cell budget 2s)", true},
	} {
		r.Notes = nil
		if c.note != "" {
			r.Notes = []string{c.note}
		}
		err := CheckOutput(writeReport(t, r))
		if (err == nil) != c.ok {
			t.Errorf("note %q: CheckOutput = %v, want ok %v", c.note, err, c.ok)
		}
	}
}

// An interrupted run says so in its summary and machine.json, naming what did
// not run, and never that every cell ran.
func TestInterruptedRunSaysSo(t *testing.T) {
	dir := t.TempDir()
	r := fakeReport(t, testConfig())
	r.Interrupted = "stopped from outside (interrupt) after 12s"
	r.NotRun = []string{"ipvs N=200 E=2", "iptables/nft N=200 E=2"}
	if err := WriteRecord(filepath.Join(dir, bench.WhereHost), r); err != nil {
		t.Fatal(err)
	}
	if err := Publish(dir, "svclab bench", "**Interrupted**: the vm part did not run."); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, SummaryFile)); err != nil || !strings.Contains(string(b), "the vm part did not run") {
		t.Errorf("the combined summary lacks the part that did not run: %v", err)
	}
	for _, f := range []string{SummaryFile, filepath.Join(bench.WhereHost, SummaryFile), filepath.Join(bench.WhereHost, MachineFile)} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"stopped from outside (interrupt) after 12s", "ipvs N=200 E=2", "iptables/nft N=200 E=2"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q", f, want)
			}
		}
		if strings.Contains(string(b), "every cell ran its full repetitions") {
			t.Errorf("%s says every cell ran", f)
		}
	}
	back, err := Load(filepath.Join(dir, bench.WhereHost))
	if err != nil || back.Interrupted != r.Interrupted || !slices.Equal(back.NotRun, r.NotRun) {
		t.Errorf("loaded back: %q %v, %v", back.Interrupted, back.NotRun, err)
	}
}
