package report

import (
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/svclab/svclab/lab/bench"
)

// CheckOutput checks the shape of what `svclab bench` wrote to dir, never a
// timing: either a combined directory (summary.md above vm/ and host/ report
// directories) or one report directory. In each report it checks the record
// (CheckRecord), that summary.md has its sections, and that each plot is a
// PNG the summary shows.
func CheckOutput(dir string) error {
	return check(dir, true)
}

// CheckRecord checks a report directory's record alone (results.csv and
// machine.json, before anything is drawn from it): results.csv parses,
// machine.json names the machine, every mode, method, variant, N and E asked
// for has every metric (unless a note says why a cell was cut), a metric one
// size has every size has, repeated metrics have at least the minimum
// repetitions, and the kernel holds at least what the proxier says it
// installed.
func CheckRecord(dir string) error {
	return checkReportDir(dir, false)
}

func check(dir string, drawn bool) error {
	var found []string
	for _, p := range Parts {
		if st, err := os.Stat(filepath.Join(dir, p)); err == nil && st.IsDir() {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return checkReportDir(dir, drawn)
	}
	var errs []error
	summary, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil && drawn {
		errs = append(errs, err)
	}
	for _, p := range found {
		if err := checkReportDir(filepath.Join(dir, p), drawn); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
		if drawn && summary != nil && !strings.Contains(string(summary), "("+p+"/"+SummaryFile+")") {
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
	r    *bench.Report
	a    *analysis
	errs []error
}

func (k *checker) fail(format string, args ...any) {
	k.errs = append(k.errs, fmt.Errorf(format, args...))
}

// noted tells whether a note names the subject, the cell at N=n E=e, and
// every word.
func (k *checker) noted(s bench.Subject, n, e int, words ...string) bool {
	for _, note := range k.r.Notes {
		ok := strings.Contains(note, s.String()) && namesCell(note, n, e)
		for _, w := range words {
			ok = ok && strings.Contains(note, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// namesCell tells whether note names "N=n E=e" (and not E=e0, say).
func namesCell(note string, n, e int) bool {
	c := fmt.Sprintf("N=%d E=%d", n, e)
	for rest := note; ; {
		i := strings.Index(rest, c)
		if i < 0 {
			return false
		}
		rest = rest[i+len(c):]
		if rest == "" || rest[0] < '0' || rest[0] > '9' {
			return true
		}
	}
}

// cut tells whether a note says the subject's curve stopped at or below n.
func (k *checker) cut(s bench.Subject, n, e int) bool {
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
func (k *checker) need(s bench.Subject, n, e int, metric string, min int, why ...string) {
	got := len(k.a.get(s, n, e, metric))
	switch {
	case got == 0:
		k.fail("%s N=%d E=%d: no %s", s, n, e, metric)
	case got < min && (len(why) == 0 || !k.noted(s, n, e, why...)):
		k.fail("%s N=%d E=%d: %d %s, want at least %d", s, n, e, got, metric, min)
	}
}

// updates checks the repeated updates: enough syncs, and for each an outcome
// (a latency, or a recorded failure). An update a note says was not run (its
// one repetition estimated too long) may have none.
func (k *checker) updates(s bench.Subject, n, e int) {
	for _, ph := range []string{"change", "add"} {
		syncs := len(k.a.get(s, n, e, ph+"_sync"))
		if syncs == 0 && k.noted(s, n, e, ph, "not run") {
			continue
		}
		// Explained by the cell budget's or the probe Services' note on this phase.
		k.need(s, n, e, ph+"_sync", k.r.Config.MinReps, ph+":")
		if got := len(k.a.get(s, n, e, ph+"_programming")) + len(k.a.get(s, n, e, ph+"_failed")); got != syncs {
			k.fail("%s N=%d E=%d: %d %s outcomes for %d syncs", s, n, e, got, ph, syncs)
		}
	}
}

func (k *checker) dataPath(s bench.Subject, n, e int) {
	for _, m := range []string{"connect_baseline", "connect_first", "connect_last", "connect_pod"} {
		// Explained by the note on failed connections to this target.
		k.need(s, n, e, m, k.r.Config.Connects, "data path:", "("+m+")")
	}
}

// coverage checks that every cell asked for was measured or noted as cut.
func (k *checker) coverage() {
	measured, err := k.r.Config.Measured()
	if err != nil {
		k.fail("%s: %v", MachineFile, err)
		return
	}
	for _, me := range measured {
		for _, v := range me.Variants {
			for _, e := range k.r.Config.Endpoints {
				for _, n := range k.r.Config.Services {
					k.cell(me, v.Name, n, e)
				}
			}
		}
	}
	kp, err := k.r.Config.KubeProxySubjects()
	if err != nil {
		k.fail("%s: %v", MachineFile, err)
	}
	for _, s := range kp {
		for _, e := range k.r.Config.Endpoints {
			for _, n := range k.r.Config.Services {
				if k.cut(s, n, e) {
					continue
				}
				// The real kube-proxy: its cold sync by its own metrics, the
				// time from its start to the first connection (or a failure),
				// and the updates.
				k.need(s, n, e, "cold_sync", 1)
				k.need(s, n, e, "cold_startup_sync", 1)
				if len(k.a.get(s, n, e, "cold_programming"))+len(k.a.get(s, n, e, "cold_failed")) != 1 {
					k.fail("%s N=%d E=%d: no outcome of the first connection after the cold sync", s, n, e)
				}
				k.updates(s, n, e)
			}
		}
	}
}

// cell checks one mode and variant at one size: the methods that share the
// cold sync (the first makes it, with the data path; the others restart over
// it), the bare apply beside it when the run made any, and each method that
// writes rule by rule.
func (k *checker) cell(me bench.Measured, variant string, n, e int) {
	first := true
	for _, method := range me.Methods {
		s := bench.Subject{Mode: me.Mode.Name, Method: method, Backend: variant}
		if k.cut(s, n, e) {
			continue
		}
		if me.Mode.WritesPerRule(method) {
			k.need(s, n, e, "cold_sync", 1)
			k.updates(s, n, e)
			continue
		}
		k.updates(s, n, e)
		if !first {
			k.need(s, n, e, "restart_sync", 1)
			continue
		}
		first = false
		k.dataPath(s, n, e)
		k.need(s, n, e, "cold_sync", 1)
		k.need(s, n, e, "kernel_memory", 1)
		if k.a.has(s.Bare(), "cold_sync") && !k.noted(s.Bare(), n, e, "stopped at the") {
			k.need(s.Bare(), n, e, "cold_sync", 1)
		}
	}
}

// consistent checks that a metric of a sync one size has, every size that
// made that sync has: a part, a count or a reading of the kernel that went
// missing at one size. Outcomes of the prober, and failures, vary.
func (k *checker) consistent() {
	type group struct {
		s      bench.Subject
		e      int
		marker string
	}
	metrics := map[group][]string{}
	for _, row := range k.r.Rows {
		m := row.Metric
		if strings.HasSuffix(m, "_programming") || strings.HasSuffix(m, "_poll_interval") || strings.HasSuffix(m, "_failed") ||
			strings.HasSuffix(m, "_failures") || strings.HasPrefix(m, "connect_") {
			continue
		}
		marker := "kernel_memory"
		if phase, _, ok := strings.Cut(m, "_"); ok && phase != "kernel" {
			marker = phase + "_sync"
		}
		g := group{bench.SubjectOf(row), row.Endpoints, marker}
		if !slices.Contains(metrics[g], m) {
			metrics[g] = append(metrics[g], m)
		}
	}
	for g, ms := range metrics {
		for _, n := range k.a.sizes(g.s, g.e, g.marker) {
			for _, m := range ms {
				if len(k.a.get(g.s, n, g.e, m)) == 0 {
					k.fail("%s N=%d E=%d: no %s, which other sizes have", g.s, n, g.e, m)
				}
			}
		}
	}
}

// kernelHolds checks that the kernel reported holding something, and at least
// what the proxier said its cold sync installed.
func (k *checker) kernelHolds() {
	for _, row := range k.r.Rows {
		name, ok := strings.CutPrefix(row.Metric, "kernel_")
		if !ok || row.Unit != bench.UnitCount {
			continue
		}
		s := bench.SubjectOf(row)
		if row.Value < 1 {
			k.fail("%s N=%d E=%d: the kernel holds %.0f %s", s, row.Services, row.Endpoints, row.Value, name)
		}
		for _, own := range k.a.get(s, row.Services, row.Endpoints, "cold_"+name) {
			if row.Value < own {
				k.fail("%s N=%d E=%d: %s is %.0f, want at least %.0f (cold_%s)", s, row.Services, row.Endpoints, row.Metric, row.Value, own, name)
			}
		}
	}
}

func checkReportDir(dir string, drawn bool) error {
	r, err := Load(dir)
	if err != nil {
		return err
	}
	k := &checker{r: r, a: analyse(r)}
	m := r.Machine
	if m.Where != bench.WhereHost && m.Where != bench.WhereVM {
		k.fail("%s: where %q", MachineFile, m.Where)
	}
	if m.Kernel == "" || m.CPU == "" || m.CPUs < 1 {
		k.fail("%s: kernel, CPU or CPU count missing", MachineFile)
	}
	c := r.Config
	if len(c.Services) == 0 || len(c.Endpoints) == 0 || len(c.Modes)+len(c.KubeProxyModes) == 0 || c.MinReps < 1 || c.Connects < 1 {
		k.fail("%s: settings lack sizes, modes, repetitions or connections", MachineFile)
	}
	k.asked()
	for _, row := range r.Rows {
		if row.Value < 0 && row.Metric != "kernel_memory" {
			k.fail("%s %s N=%d E=%d rep %d: negative value %g", bench.SubjectOf(row), row.Metric, row.Services, row.Endpoints, row.Rep, row.Value)
		}
		if want := metricUnit(row.Metric); want == "" {
			k.fail("unknown metric %q", row.Metric)
		} else if row.Unit != want {
			k.fail("%s: unit %q, want %q", row.Metric, row.Unit, want)
		}
	}
	k.coverage()
	k.consistent()
	k.kernelHolds()
	if drawn {
		k.drawn(dir)
	}
	return errors.Join(k.errs...)
}

// asked checks that every method and backend the settings list is one a mode
// measured has: else nothing of it was asked for, and nothing checked.
func (k *checker) asked() {
	subjects, err := k.r.Config.Subjects()
	if err != nil {
		return // coverage says so
	}
	for _, m := range k.r.Config.Methods {
		if !slices.ContainsFunc(subjects, func(s bench.Subject) bool { return s.Method == m }) {
			k.fail("%s: method %q is no measured mode's", MachineFile, m)
		}
	}
	for _, b := range k.r.Config.Backends {
		if !slices.ContainsFunc(subjects, func(s bench.Subject) bool { return s.Backend == b }) {
			k.fail("%s: backend %q is no measured mode's", MachineFile, b)
		}
	}
}

// drawn checks what is drawn from the record: the summary's sections, and
// every plot a PNG the summary shows.
func (k *checker) drawn(dir string) {
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
	for _, e := range k.a.es {
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

// syncPhases prefix the metrics of a sync (bench.Row).
var syncPhases = []string{"cold_", "restart_", "change_", "add_"}

// metricUnit is the unit a metric is written in; "" for a metric the bench
// does not write.
func metricUnit(metric string) string {
	phased := slices.ContainsFunc(syncPhases, func(p string) bool { return strings.HasPrefix(metric, p) })
	switch {
	case metric == "kernel_memory" || (phased || strings.HasPrefix(metric, "kernel_")) && strings.HasSuffix(metric, "_bytes"):
		return bench.UnitBytes
	case strings.HasPrefix(metric, "connect_") && strings.HasSuffix(metric, "_failures"):
		return bench.UnitCount
	case strings.HasPrefix(metric, "connect_"):
		return bench.UnitSeconds
	case !phased && !strings.HasPrefix(metric, "kernel_"):
		return ""
	case strings.HasSuffix(metric, "_sync"), strings.HasSuffix(metric, "_programming"), strings.HasSuffix(metric, "_poll_interval"),
		strings.HasSuffix(metric, "_own"), strings.Contains(metric, "_part_"):
		return bench.UnitSeconds
	}
	// The counts a proxier reports of a sync, what the kernel holds, failures.
	return bench.UnitCount
}
