package bench

import (
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Parts of a combined output directory: the run in svclab's VM and the one on
// the host, each a report directory of its own.
var Parts = []string{WhereVM, WhereHost}

// CheckOutput checks the shape of what `svclab bench` wrote to dir, never a
// timing: either a combined directory (summary.md above vm/ and host/ report
// directories) or one report directory. In each report it checks that
// results.csv parses, machine.json names the machine, every mode, method,
// backend, N and E asked for has every metric (unless a note says why a cell was
// cut), repeated metrics have at least the minimum repetitions, summary.md has
// its sections, and each plot is a PNG.
func CheckOutput(dir string) error {
	var found []string
	for _, p := range Parts {
		if st, err := os.Stat(filepath.Join(dir, p)); err == nil && st.IsDir() {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return checkReportDir(dir)
	}
	var errs []error
	summary, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range found {
		if err := checkReportDir(filepath.Join(dir, p)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
		if summary != nil && !strings.Contains(string(summary), "("+p+"/"+SummaryFile+")") {
			errs = append(errs, fmt.Errorf("%s does not link %s/%s", SummaryFile, p, SummaryFile))
		}
	}
	return errors.Join(errs...)
}

// summarySections are headings every summary.md has.
var summarySections = []string{"Targets", "Growth exponents", "Cold sync", "Add one Service", "Change one Service's endpoints",
	"Data path", "Rules and kernel memory", "Notes"}

// checker holds one report directory under check.
type checker struct {
	r    *Report
	sr   *series
	errs []error
}

func (k *checker) fail(format string, args ...any) {
	k.errs = append(k.errs, fmt.Errorf(format, args...))
}

// noted tells whether a note names the subject and every word.
func (k *checker) noted(s subject, words ...string) bool {
	for _, n := range k.r.Notes {
		ok := strings.Contains(n, s.String())
		for _, w := range words {
			ok = ok && strings.Contains(n, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// cut tells whether a note says the subject's curve stopped at or below n.
func (k *checker) cut(s subject, n, e int) bool {
	prefix := fmt.Sprintf("%s E=%d cut at N=", s, e)
	for _, note := range k.r.Notes {
		i := strings.Index(note, prefix)
		if i < 0 {
			continue
		}
		var at int
		if _, err := fmt.Sscanf(note[i+len(prefix):], "%d", &at); err == nil && at > 0 && at <= n {
			return true
		}
	}
	return false
}

// need checks that a metric has rows: at least min of them, unless a note
// about the cell explains fewer. That note must name the cell and contain
// every word of why (say, the phase and its colon): a note about something
// else in the same cell explains nothing.
func (k *checker) need(s subject, n, e int, metric string, min int, why ...string) {
	got := len(k.sr.get(s, n, e, metric))
	switch {
	case got == 0:
		k.fail("%s N=%d E=%d: no %s", s, n, e, metric)
	case got < min && (len(why) == 0 || !k.noted(s, append([]string{fmt.Sprintf("N=%d E=%d ", n, e)}, why...)...)):
		k.fail("%s N=%d E=%d: %d %s, want at least %d", s, n, e, got, metric, min)
	}
}

// atLeast checks that a count the kernel reported is at least want.
func (k *checker) atLeast(s subject, n, e int, metric string, want float64) {
	for _, v := range k.sr.get(s, n, e, metric) {
		if v < want {
			k.fail("%s N=%d E=%d: %s is %.0f, want at least %.0f", s, n, e, metric, v, want)
		}
	}
}

// updates checks the repeated updates: enough syncs, and for each an outcome
// (a latency, or a recorded failure).
func (k *checker) updates(s subject, n, e int, phases ...phase) {
	for _, ph := range phases {
		// Explained by the cell budget's or the probe Services' note on this phase.
		k.need(s, n, e, ph.name+"_sync", k.r.Config.MinReps, ph.name+":")
		syncs := len(k.sr.get(s, n, e, ph.name+"_sync"))
		if got := len(k.sr.get(s, n, e, ph.name+"_programming")) + len(k.sr.get(s, n, e, ph.name+"_failed")); got != syncs {
			k.fail("%s N=%d E=%d: %d %s outcomes for %d syncs", s, n, e, got, ph.name, syncs)
		}
	}
}

func (k *checker) dataPath(s subject, n, e int) {
	for _, m := range []string{"connect_baseline", "connect_first", "connect_last", "connect_pod"} {
		// Explained by the note on failed connections to this target.
		k.need(s, n, e, m, k.r.Config.Connects, "data path:", "("+m+")")
	}
}

// coverage checks that every cell asked for was measured or noted as cut.
func (k *checker) coverage() {
	c := k.r.Config
	for _, mode := range c.Modes {
		for _, e := range c.Endpoints {
			for _, n := range c.Services {
				if mode != "iptables" {
					s := subject{mode, methodOf(mode), ""}
					if k.cut(s, n, e) {
						continue
					}
					k.need(s, n, e, "cold_sync", 1)
					k.need(s, n, e, "kernel_memory", 1)
					if mode == "ipvs" {
						k.need(s, n, e, "virtual_servers", 1)
						k.need(s, n, e, "real_servers", 1)
						// The kernel must hold what was asked for: a virtual
						// server per ClusterIP, a real server per endpoint.
						k.atLeast(s, n, e, "virtual_servers", float64(n))
						k.atLeast(s, n, e, "real_servers", float64(n*e))
					}
					k.dataPath(s, n, e)
					k.updates(s, n, e, phaseChange, phaseAdd)
					continue
				}
				for _, b := range c.Backends {
					k.iptablesCell(b, n, e)
				}
			}
		}
	}
}

func (k *checker) iptablesCell(backend string, n, e int) {
	first := true
	for _, method := range k.r.Config.Methods {
		s := subject{"iptables", method, backend}
		if k.cut(s, n, e) {
			continue
		}
		if method == MethodPerRule {
			k.need(s, n, e, "cold_sync", 1)
			if len(k.sr.get(s, n, e, "add_sync")) > 0 || !k.noted(s, fmt.Sprintf("N=%d E=%d", n, e), "add-one not run") {
				k.updates(s, n, e, phaseAdd)
			}
			k.updates(s, n, e, phaseChange)
			continue
		}
		k.updates(s, n, e, phaseChange, phaseAdd)
		if !first {
			k.need(s, n, e, "restart_sync", 1)
			continue
		}
		first = false
		k.dataPath(s, n, e)
		for _, m := range []string{"cold_sync", "cold_write", "cold_generate", "cold_setup", "cold_save",
			"kernel_memory", "rules", "chains", "kernel_rules", "restore_bytes"} {
			k.need(s, n, e, m, 1)
		}
		if !k.noted(bareSubject(backend), fmt.Sprintf("N=%d E=%d", n, e), "stopped at the") {
			k.need(bareSubject(backend), n, e, "cold_sync", 1)
		}
		if rules := k.sr.get(s, n, e, "rules"); len(rules) > 0 {
			k.atLeast(s, n, e, "kernel_rules", rules[0])
		}
	}
}

func checkReportDir(dir string) error {
	r, err := Load(dir)
	if err != nil {
		return err
	}
	k := &checker{r: r, sr: newSeries(r.Rows)}
	m := r.Machine
	if m.Where != WhereHost && m.Where != WhereVM {
		k.fail("%s: where %q", MachineFile, m.Where)
	}
	if m.Kernel == "" || m.CPU == "" || m.CPUs < 1 {
		k.fail("%s: kernel, CPU or CPU count missing", MachineFile)
	}
	c := r.Config
	if len(c.Services) == 0 || len(c.Endpoints) == 0 || len(c.Modes) == 0 || c.MinReps < 1 || c.Connects < 1 {
		k.fail("%s: settings lack sizes, modes, repetitions or connections", MachineFile)
	}
	if slices.Contains(c.Modes, "iptables") && (len(c.Methods) == 0 || len(c.Backends) == 0) {
		// Else no iptables cell would be asked for, and none checked.
		k.fail("%s: settings lack iptables methods or backends", MachineFile)
	}
	for _, row := range r.Rows {
		if row.Value < 0 && row.Metric != "kernel_memory" {
			k.fail("%s %s N=%d E=%d rep %d: negative value %g", subject{row.Mode, row.Method, row.Backend}, row.Metric, row.Services, row.Endpoints, row.Rep, row.Value)
		}
		if want := metricUnit(row.Metric); want == "" {
			k.fail("unknown metric %q", row.Metric)
		} else if row.Unit != want {
			k.fail("%s: unit %q, want %q", row.Metric, row.Unit, want)
		}
	}
	k.coverage()

	summary, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		k.errs = append(k.errs, err)
	}
	for _, h := range summarySections {
		if !strings.Contains(string(summary), "# "+h) {
			k.fail("%s: no section %q", SummaryFile, h)
		}
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, PlotsDir, "*.png"))
	// Every E with measurements has its plots (an E whose every cell was cut,
	// with notes saying so, has none).
	_, measured := k.sr.sizes()
	for _, e := range measured {
		for _, want := range []string{"cold_sync", "add_sync", "add_programming", "change_sync", "change_programming", "connect"} {
			p := filepath.Join(dir, PlotsDir, fmt.Sprintf("%s-e%d.png", want, e))
			if !slices.Contains(pngs, p) {
				k.fail("no plot %s", p)
			}
		}
	}
	for _, p := range pngs {
		if err := checkPNG(p); err != nil {
			k.errs = append(k.errs, err)
		}
		if !strings.Contains(string(summary), PlotsDir+"/"+filepath.Base(p)) {
			k.fail("%s does not show %s", SummaryFile, filepath.Base(p))
		}
	}
	return errors.Join(k.errs...)
}

func checkPNG(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		return fmt.Errorf("%s: %dx%d pixels", path, b.Dx(), b.Dy())
	}
	return nil
}

// metricUnit is the unit a metric is written in; "" for a metric the bench
// does not write.
func metricUnit(metric string) string {
	switch {
	case metric == "kernel_memory" || metric == "restore_bytes":
		return unitBytes
	case slices.Contains([]string{"rules", "chains", "kernel_rules", "virtual_servers", "real_servers", "cold_commands"}, metric),
		strings.HasSuffix(metric, "_rules_written"), strings.HasSuffix(metric, "_failed"), strings.HasSuffix(metric, "_failures"):
		return unitCount
	case strings.HasSuffix(metric, "_sync"), strings.HasSuffix(metric, "_programming"), strings.HasPrefix(metric, "connect_"),
		strings.Contains(metric, "_part_"),
		strings.HasPrefix(metric, "cold_"), strings.HasSuffix(metric, "_poll_interval"):
		return unitSeconds
	}
	return ""
}
