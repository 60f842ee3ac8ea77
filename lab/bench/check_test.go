package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeReport is a report of the shape Run writes for c, with made-up values:
// the checker's input, without the root and minutes a real run needs (the
// root test in run_test.go checks a real one).
func fakeReport(c Config) *Report {
	var rows []Row
	add := func(s subject, n, e int, metric string, k int, unit string) {
		for i := 0; i < k; i++ {
			rows = append(rows, Row{Mode: s.mode, Method: s.method, Backend: s.backend, Services: n, Endpoints: e,
				Metric: metric, Rep: i, Value: 1e-3 * float64(n) * float64(i+1), Unit: unit})
		}
	}
	updates := func(s subject, n, e int) {
		for _, ph := range []string{"change", "add"} {
			add(s, n, e, ph+"_sync", c.Reps, unitSeconds)
			add(s, n, e, ph+"_programming", c.Reps, unitSeconds)
			add(s, n, e, ph+"_poll_interval", c.Reps, unitSeconds)
		}
	}
	dataPath := func(s subject, n, e int) {
		for _, m := range []string{"connect_baseline", "connect_first", "connect_last", "connect_pod"} {
			add(s, n, e, m, c.Connects, unitSeconds)
		}
	}
	for _, e := range c.Endpoints {
		for _, n := range c.Services {
			for _, mode := range c.Modes {
				if mode != "iptables" {
					s := subject{mode, methodOf(mode), ""}
					add(s, n, e, "cold_sync", 1, unitSeconds)
					add(s, n, e, "kernel_memory", 1, unitBytes)
					rows = append(rows, Row{Mode: s.mode, Method: s.method, Services: n, Endpoints: e, Metric: "virtual_servers", Value: float64(n), Unit: unitCount},
						Row{Mode: s.mode, Method: s.method, Services: n, Endpoints: e, Metric: "real_servers", Value: float64(n * e), Unit: unitCount})
					dataPath(s, n, e)
					updates(s, n, e)
					continue
				}
				for _, b := range c.Backends {
					for i, m := range c.Methods {
						s := subject{mode, m, b}
						updates(s, n, e)
						if i > 0 {
							add(s, n, e, "restart_sync", 1, unitSeconds)
							continue
						}
						dataPath(s, n, e)
						for _, metric := range []string{"cold_sync", "cold_write", "cold_generate", "cold_setup", "cold_save"} {
							add(s, n, e, metric, 1, unitSeconds)
						}
						add(s, n, e, "kernel_memory", 1, unitBytes)
						add(s, n, e, "restore_bytes", 1, unitBytes)
						for metric, v := range map[string]int{"rules": (2 + 3*e) * n, "chains": (1 + e) * n, "kernel_rules": (2+3*e)*n + 14} {
							rows = append(rows, Row{Mode: s.mode, Method: s.method, Backend: s.backend, Services: n, Endpoints: e, Metric: metric, Value: float64(v), Unit: unitCount})
						}
						add(bareSubject(b), n, e, "cold_sync", 1, unitSeconds)
					}
				}
			}
		}
	}
	return &Report{Config: c, Rows: rows, Started: time.Now(), Elapsed: time.Minute,
		Machine: Machine{Where: WhereHost, Kernel: "6.18", CPU: "test CPU", CPUs: 2}}
}

func testConfig() Config {
	c := QuickConfig(WhereHost)
	c.Modes = []string{"iptables", "ipvs"}
	c.Methods = []string{MethodFull, MethodPartial}
	c.Backends = []string{"nft"}
	return c
}

func writeReport(t *testing.T, r *Report) string {
	t.Helper()
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckOutputAcceptsAWholeReport(t *testing.T) {
	dir := writeReport(t, fakeReport(testConfig()))
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
	drop := func(match func(Row) bool) func(*Report) {
		return func(r *Report) { r.Rows = slices.DeleteFunc(r.Rows, match) }
	}
	for name, tc := range map[string]struct {
		change func(*Report)
		after  func(dir string)
		want   string
	}{
		"a cell without latencies": {
			change: drop(func(r Row) bool {
				return r.Method == MethodPartial && r.Services == 200 && r.Metric == "add_programming"
			}),
			want: "0 add outcomes for 3 syncs",
		},
		"too few repetitions": {
			change: drop(func(r Row) bool {
				return r.Mode == "ipvs" && r.Services == 20 && r.Metric == "change_sync" && r.Rep > 0
			}),
			want: "1 change_sync, want at least 2",
		},
		"a size missing": {
			change: drop(func(r Row) bool { return r.Mode == "ipvs" && r.Services == 200 }),
			want:   "ipvs/netlink N=200 E=2: no cold_sync",
		},
		"no bare restore": {
			change: drop(func(r Row) bool { return r.Method == "bare-restore" }),
			want:   "iptables/bare-restore/nft N=20 E=2: no cold_sync",
		},
		"an unknown metric": {
			change: func(r *Report) { r.Rows = append(r.Rows, Row{Mode: "ipvs", Metric: "mystery", Unit: unitSeconds}) },
			want:   `unknown metric "mystery"`,
		},
		"an empty IPVS table": {
			change: func(r *Report) {
				for i := range r.Rows {
					if r.Rows[i].Metric == "virtual_servers" {
						r.Rows[i].Value = 0
					}
				}
			},
			want: "virtual_servers is 0, want at least 20",
		},
		"fewer rules in the kernel than generated": {
			change: func(r *Report) {
				for i := range r.Rows {
					if r.Rows[i].Metric == "kernel_rules" {
						r.Rows[i].Value = 1
					}
				}
			},
			want: "kernel_rules is 1",
		},
		"a wrong unit": {
			change: func(r *Report) { r.Rows[0].Unit = unitBytes },
			want:   "unit",
		},
		"no machine": {
			change: func(r *Report) { r.Machine.Kernel = "" },
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
			r := fakeReport(testConfig())
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
	r := fakeReport(testConfig())
	r.Rows = slices.DeleteFunc(r.Rows, func(r Row) bool { return r.Method == MethodPartial && r.Services == 200 })
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

// Settings that ask for no iptables cell cannot make missing iptables rows pass.
func TestCheckOutputNeedsIPTablesBackends(t *testing.T) {
	r := fakeReport(testConfig())
	r.Config.Backends = nil
	if err := CheckOutput(writeReport(t, r)); err == nil || !strings.Contains(err.Error(), "methods or backends") {
		t.Errorf("CheckOutput with no backends = %v", err)
	}
}

func TestCombine(t *testing.T) {
	dir := t.TempDir()
	host := fakeReport(testConfig())
	vm := fakeReport(testConfig())
	vm.Machine.Where = WhereVM
	for name, r := range map[string]*Report{WhereHost: host, WhereVM: vm} {
		if err := r.Write(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Combine(dir, "svclab bench --test"); err != nil {
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
	r := fakeReport(testConfig())
	ipvs := subject{mode: "ipvs", method: MethodNetlink}
	// The first change repetition stays, its sync and its programming latency.
	r.Rows = slices.DeleteFunc(r.Rows, func(row Row) bool {
		return row.Mode == "ipvs" && row.Services == 20 && row.Endpoints == 2 &&
			(row.Metric == "change_sync" || row.Metric == "change_programming") && row.Rep > 0
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
