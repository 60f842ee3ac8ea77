package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/svclab/svclab/lab/bench"
	"github.com/svclab/svclab/lab/proxy"
)

// Targets of the issue, reported (never test thresholds).
const (
	// OverheadTarget is the largest acceptable ratio of svclab's cold sync to a
	// bare apply of the same rules by the mode's own program.
	OverheadTarget = 1.10
	// IPVSAddExponentTarget bounds the growth exponent of the add-one sync of a
	// mode of the IPVS model.
	IPVSAddExponentTarget = 0.2
)

// phases are the updates, with their titles and what a repetition does.
var phases = []struct{ name, title, how string }{
	{"add", "Add one Service with N present", "Additions accumulate: repetition k adds a Service with N+k present (the added Services sort last in KUBE-SERVICES)."},
	{"change", "Change one Service's endpoints with N present", "Each repetition moves the endpoints of another probe Service from closed ports of the backend pods to open ones."},
}

// writeSummary writes the report as Markdown, its top heading at level h; plot
// paths are prefixed with prefix (for a summary that sits above the report's
// directory).
func (a *analysis) writeSummary(w io.Writer, h int, prefix string, plots []plotFile) {
	r := a.r
	where := "natively, on this machine's kernel"
	if r.Machine.Where == bench.WhereVM {
		where = "in svclab's VM, every mode in the same guest kernel"
	}
	fmt.Fprintf(w, "%s svclab bench: %s\n\n", strings.Repeat("#", h), where)
	if r.Interrupted != "" {
		fmt.Fprintf(w, "**This run was interrupted** (%s): what follows is what it measured until then; the notes list what did not run.\n\n", r.Interrupted)
	}
	a.writeMachine(w)

	heading(w, h+1, "Targets")
	a.writeTargets(w)

	heading(w, h+1, "Growth exponents")
	fmt.Fprintln(w, "Slope of log(p50) against log(N), least squares over the sizes measured: 0 is flat, 1 linear, 2 quadratic. Most curves are a fixed cost plus a growing one, so the slope between the two largest sizes (\"last two\") says more about large clusters than the fit over all.")
	fmt.Fprintln(w)
	metrics := []string{"cold_sync", "add_sync", "add_programming", "change_sync", "change_programming"}
	t := newTable(append([]string{"mode/method/backend", "E"}, metrics...)...)
	for _, e := range a.es {
		for _, s := range a.order {
			cells := []string{s.String(), fmt.Sprint(e)}
			seen := false
			for _, m := range metrics {
				g := a.fit(s, e, m)
				cells = append(cells, g.String())
				seen = seen || g.ok
			}
			if seen {
				t.add(cells...)
			}
		}
	}
	t.write(w)

	heading(w, h+1, "Cold sync: N Services from empty (p50)")
	fmt.Fprintf(w, "The first sync of every method that writes the whole table at once (iptables: full, partial, changed) is the same write of everything; the table shows it under the method that ran it. %s is the mode's own program alone (iptables-restore) fed the very same rules; a method that writes rule by rule (iptables: per-rule, one iptables call per chain and rule) has its own.\n", bench.BareMethod)
	for _, e := range a.es {
		fmt.Fprintf(w, "\nE=%d endpoints per Service:\n\n", e)
		a.sizeTable(e, "cold_sync").write(w)
	}
	if len(a.subjects("restart_sync")) > 0 {
		fmt.Fprintln(w, "\nkube-proxy restarting on a programmed node: a new proxier's first sync, which writes everything over the rules already there (p50):")
		for _, e := range a.es {
			fmt.Fprintf(w, "\nE=%d:\n\n", e)
			a.sizeTable(e, "restart_sync").write(w)
		}
	}

	for _, ph := range phases {
		heading(w, h+1, ph.title)
		fmt.Fprintf(w, "%s sync: the proxier's Sync call. programming: network-programming latency, from the start of the update to the first TCP connection through the changed Service that succeeded, a new connection attempted every %s from a pod. written: what the sync wrote, as the proxier counts it.\n",
			ph.how, r.Config.ProbeInterval)
		for _, e := range a.es {
			fmt.Fprintf(w, "\nE=%d:\n\n", e)
			a.updateTable(e, ph.name).write(w)
		}
	}

	a.writeKubeProxy(w, h+1)

	a.writeParts(w, h+1)

	heading(w, h+1, "Data path: TCP handshake from a pod")
	fmt.Fprintf(w, "Connect time (SYN to established, around connect(2) in the client pod) to the first and the last Service in the table and straight to a backend pod (no NAT), %d connections to each, interleaved; baseline: straight to the pod before the node had any rule. iptables walks KUBE-SERVICES in order for the first packet of every connection, and with a bridge CNI (br_netfilter) that includes pod-to-pod connections on the node; IPVS finds the virtual server in a hash table.\n\n", r.Config.Connects)
	a.dataPathTable().write(w)

	heading(w, h+1, "Rules and kernel memory")
	fmt.Fprintln(w, "Each count as svclab's proxier reported it after the cold sync, and as the kernel reported it then (iptables: the -A lines iptables-save prints for filter, nat and mangle; IPVS: /proc/net/ip_vs of the node). kernel memory: the change of SUnreclaim + VmallocUsed + Percpu in /proc/meminfo across the first cold sync (machine-wide; on a shared host other work adds noise of a few MB either way), and per unit of the largest count the kernel reported.")
	fmt.Fprintln(w)
	a.memoryTable().write(w)

	a.writeOverhead(w, h+1)

	heading(w, h+1, "Notes: what was cut short or failed")
	if r.Interrupted != "" {
		fmt.Fprintf(w, "- The run was interrupted (%s). Did not run whole: %s.\n", r.Interrupted, orNone(r.NotRun))
	}
	if len(r.Notes) == 0 && r.Interrupted == "" {
		fmt.Fprintln(w, "Nothing: every cell ran its full repetitions and every update was seen on the wire.")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}

	if len(plots) > 0 {
		heading(w, h+1, "Plots")
		for _, p := range plots {
			fmt.Fprintf(w, "![%s](%s%s)\n\n", p.Title, prefix, p.Path)
		}
	}
}

func (a *analysis) writeMachine(w io.Writer) {
	r := a.r
	m := r.Machine
	t := newTable("", "")
	t.add("where", m.Where)
	t.add("kernel", m.Kernel)
	keys := make([]string, 0, len(m.IPTables))
	for k := range m.IPTables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.add(fmt.Sprintf("iptables (%s)", k), m.IPTables[k])
	}
	hv := ""
	if m.Hypervisor {
		hv = " (hypervisor)"
	}
	t.add("CPU", fmt.Sprintf("%s × %d%s", m.CPU, m.CPUs, hv))
	if m.Accel != "" {
		t.add("VM accelerator", m.Accel)
	}
	t.add("memory", fmt.Sprintf("%d MiB", m.MemoryMiB))
	if m.LoadStart != "" {
		t.add("load average (1, 5, 15 min)", fmt.Sprintf("%s at the start, %s at the end", m.LoadStart, m.LoadEnd))
	}
	if m.HostLoad != "" {
		t.add("host's load average around the VM", m.HostLoad)
	}
	t.add("kube-proxy rules reproduced", m.KubeProxy)
	t.add("Go", m.GoVersion)
	if r.Command != "" {
		t.add("command", "`"+r.Command+"`")
	}
	c := r.Config
	t.add("sizes", fmt.Sprintf("N %s; E %s", ints(c.Services), ints(c.Endpoints)))
	t.add("repetitions", fmt.Sprintf("%d per update (at least %d when one costs more than the %s cell budget); %d cold-sync pairs; %d connections per data-path target",
		c.Reps, c.MinReps, c.CellBudget, c.OverheadPairs, c.Connects))
	t.add("prober", fmt.Sprintf("an attempt every %s, each given up after %s, %d at once at most", c.ProbeInterval, c.AttemptTimeout, c.ProbeWorkers))
	t.add("started", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	t.add("took", r.Elapsed.Round(1e9).String())
	t.write(w)
}

// sizeTable is one metric's p50 with a column per N.
func (a *analysis) sizeTable(e int, metric string) *table {
	head := []string{"mode/method/backend"}
	for _, n := range a.ns {
		head = append(head, fmt.Sprintf("N=%d", n))
	}
	t := newTable(head...)
	for _, s := range a.subjects(metric) {
		if len(a.sizes(s, e, metric)) == 0 {
			continue
		}
		cells := []string{s.String()}
		for _, n := range a.ns {
			cells = append(cells, fmtSeconds(a.p(s, n, e, metric, 0.5)))
		}
		t.add(cells...)
	}
	return t
}

// updateTable is one kind of update at E=e: a row per subject and N.
func (a *analysis) updateTable(e int, phase string) *table {
	t := newTable("mode/method/backend", "N", "sync p50", "sync p90", "sync p99", "programming p50", "p90", "p99", "reps", "failed", "written")
	for _, s := range a.subjects(phase + "_sync") {
		written := a.writtenCounts(s, phase)
		for _, n := range a.sizes(s, e, phase+"_sync") {
			syncs := a.get(s, n, e, phase+"_sync")
			prog := a.get(s, n, e, phase+"_programming")
			var w []string
			for _, name := range written {
				if v := a.get(s, n, e, phase+"_"+name+"_written"); len(v) > 0 {
					w = append(w, fmt.Sprintf("%.0f %s", bench.Percentile(v, 0.5), name))
				}
			}
			if len(w) == 0 {
				w = []string{"–"}
			}
			t.add(s.String(), fmt.Sprint(n),
				fmtSeconds(bench.Percentile(syncs, 0.5)), fmtSeconds(bench.Percentile(syncs, 0.9)), fmtSeconds(bench.Percentile(syncs, 0.99)),
				fmtSeconds(bench.Percentile(prog, 0.5)), fmtSeconds(bench.Percentile(prog, 0.9)), fmtSeconds(bench.Percentile(prog, 0.99)),
				fmt.Sprint(len(syncs)), fmt.Sprint(len(a.get(s, n, e, phase+"_failed"))), strings.Join(w, ", "))
		}
	}
	return t
}

// writtenCounts are the names X of the PHASE_X_written counts s has.
func (a *analysis) writtenCounts(s bench.Subject, phase string) []string {
	var names []string
	seen := map[string]bool{}
	for _, row := range a.r.Rows {
		if bench.SubjectOf(row) != s {
			continue
		}
		rest, ok := strings.CutPrefix(row.Metric, phase+"_")
		if name, isW := strings.CutSuffix(rest, "_written"); ok && isW && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names
}

// dataPathTable is a row per subject that measured the data path, E and N.
func (a *analysis) dataPathTable() *table {
	t := newTable("mode/backend", "N", "E", "first p50", "first p99", "last p50", "last p99", "pod p50", "pod p99",
		"baseline p50", "baseline p99", "last − baseline (p50)", "failed")
	targets := []string{"connect_first", "connect_last", "connect_pod", "connect_baseline"}
	for _, e := range a.es {
		for _, s := range a.subjects("connect_last") {
			for _, n := range a.sizes(s, e, "connect_last") {
				cells := []string{modeBackend(s), fmt.Sprint(n), fmt.Sprint(e)}
				failed := 0.0
				for _, m := range targets {
					cells = append(cells, fmtSeconds(a.p(s, n, e, m, 0.5)), fmtSeconds(a.p(s, n, e, m, 0.99)))
					for _, v := range a.get(s, n, e, m+"_failures") {
						failed += v
					}
				}
				cells = append(cells, signedSeconds(a.p(s, n, e, "connect_last", 0.5)-a.p(s, n, e, "connect_baseline", 0.5)), fmt.Sprintf("%.0f", failed))
				t.add(cells...)
			}
		}
	}
	return t
}

// modeBackend labels a subject without its method: the data path is the
// rules', whichever method wrote them.
func modeBackend(s bench.Subject) string {
	if s.Backend != "" {
		return s.Mode + "/" + s.Backend
	}
	return s.Mode
}

// memoryTable is the cold sync's kernel memory beside every count the kernel
// reported, and svclab's own count of the same.
func (a *analysis) memoryTable() *table {
	var names []string
	for _, s := range a.subjects("kernel_memory") {
		for _, name := range a.kernelCounts(s) {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	head := []string{"mode/method/backend", "N", "E", "kernel memory"}
	for _, name := range names {
		head = append(head, strings.ReplaceAll(name, "_", " ")+": svclab / kernel")
	}
	t := newTable(append(head, "memory per unit")...)
	for _, e := range a.es {
		for _, s := range a.subjects("kernel_memory") {
			for _, n := range a.sizes(s, e, "kernel_memory") {
				mem := a.get(s, n, e, "kernel_memory")[0]
				cells := []string{s.String(), fmt.Sprint(n), fmt.Sprint(e), fmt.Sprintf("%.1f MiB", mem/(1<<20))}
				largest, unit := 0.0, ""
				for _, name := range names {
					own, kernel := a.get(s, n, e, "cold_"+name), a.get(s, n, e, "kernel_"+name)
					cells = append(cells, fmtCount(own)+" / "+fmtCount(kernel))
					if len(kernel) > 0 && kernel[0] > largest {
						largest, unit = kernel[0], strings.ReplaceAll(strings.TrimSuffix(name, "s"), "_", " ")
					}
				}
				per := "–"
				if largest > 0 {
					per = fmt.Sprintf("%.0f B per %s", mem/largest, unit)
				}
				t.add(append(cells, per)...)
			}
		}
	}
	return t
}

// coldSubject is the subject whose proxier made the measured cold sync of a
// mode and variant at a size: the one whose kernel memory was measured.
func (a *analysis) coldSubject(bare bench.Subject, n, e int) (bench.Subject, bool) {
	for _, s := range a.subjects("kernel_memory") {
		if s.Mode == bare.Mode && s.Backend == bare.Backend && len(a.get(s, n, e, "kernel_memory")) > 0 {
			return s, true
		}
	}
	return bench.Subject{}, false
}

// overheadRatios compare a cold sync by svclab's proxier with a bare apply of
// the same rules (p50 against p50): whole is the whole sync, own only
// svclab's own part of it (computing the rules and writing them), leaving
// out what kube-proxy itself does besides writing (ensuring its chains and
// jumps, looking for stale chains, conntrack cleanup).
func (a *analysis) overheadRatios(bare bench.Subject, n, e int) (s bench.Subject, whole, own float64, ok bool) {
	s, ok = a.coldSubject(bare, n, e)
	if !ok {
		return s, 0, 0, false
	}
	sync, b := a.get(s, n, e, "cold_sync"), a.get(bare, n, e, "cold_sync")
	if len(sync) == 0 || len(b) == 0 {
		return s, 0, 0, false
	}
	p := bench.Percentile(b, 0.5)
	return s, bench.Percentile(sync, 0.5) / p, a.p(s, n, e, "cold_own", 0.5) / p, true
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (a *analysis) writeTargets(w io.Writer) {
	wrote := false
	for _, bare := range a.subjects("cold_sync") {
		if bare.Method != bench.BareMethod {
			continue
		}
		for _, e := range a.es {
			var wholes, owns []string
			var largestN int
			largestWhole, largestOwn := 0.0, 0.0
			for _, n := range a.ns {
				if _, whole, own, ok := a.overheadRatios(bare, n, e); ok {
					wholes = append(wholes, fmt.Sprintf("N=%d %.3f", n, whole))
					owns = append(owns, fmt.Sprintf("N=%d %.3f", n, own))
					largestN, largestWhole, largestOwn = n, whole, own
				}
			}
			if len(wholes) == 0 {
				continue
			}
			wrote = true
			fmt.Fprintf(w, "- svclab's overhead over a bare apply of the same rules by the mode's own program (iptables: `iptables-restore --noflush`), %s, E=%d (target ≤ %.2f), at the largest N measured (%d): "+
				"svclab's own work (computing the rules, plus writing them) %.3f, %s; the whole cold sync %.3f, %s. "+
				"Own, by N: %s. Whole, by N: %s. The whole sync also does what kube-proxy does besides writing the rules, and svclab with it: single iptables calls ensuring chains and jumps (a few ms each on a host, about 0.1 s each in the VM, which dominate small tables), an iptables-save looking for stale chains, the UDP conntrack cleanup.\n",
				modeBackend(bare), e, OverheadTarget, largestN, largestOwn, verdict(largestOwn <= OverheadTarget), largestWhole, verdict(largestWhole <= OverheadTarget),
				strings.Join(owns, ", "), strings.Join(wholes, ", "))
		}
	}
	for _, s := range a.subjects("add_sync") {
		if m, err := proxy.Lookup(s.Mode); err != nil || m.Dataplane.Model != proxy.ModelIPVS {
			continue
		}
		for _, e := range a.es {
			g := a.fit(s, e, "add_sync")
			if !g.ok {
				continue
			}
			wrote = true
			xs, _ := a.curve(s, e, "add_sync")
			fmt.Fprintf(w, "- %s add-one sync growth exponent, E=%d (target < %.1f up to 10000 Services for the IPVS model), measured up to N=%.0f: %.2f, %s; in full %s. Programming latency: %s.\n",
				s, e, IPVSAddExponentTarget, xs[len(xs)-1], g.all.Exponent, verdict(g.all.Exponent < IPVSAddExponentTarget && xs[len(xs)-1] >= 10000),
				g, a.fit(s, e, "add_programming"))
		}
	}
	// A mode measured with several methods: how each one's add-one sync grows.
	for _, e := range a.es {
		for i, s := range a.order {
			if i > 0 && a.order[i-1].Mode == s.Mode && a.order[i-1].Backend == s.Backend {
				continue
			}
			var parts []string
			for _, t := range a.order[i:] {
				if t.Mode != s.Mode || t.Backend != s.Backend {
					break
				}
				if g := a.fit(t, e, "add_sync"); g.ok {
					parts = append(parts, fmt.Sprintf("%s %s", t.Method, g))
				}
			}
			if len(parts) > 1 {
				wrote = true
				fmt.Fprintf(w, "- %s add-one sync growth exponents by method, E=%d: %s\n", modeBackend(s), e, strings.Join(parts, ", "))
			}
		}
	}
	if !wrote {
		fmt.Fprintln(w, "No target could be evaluated: too few sizes or modes in this run.")
	}
}

func (a *analysis) writeOverhead(w io.Writer, h int) {
	var bares []bench.Subject
	for _, s := range a.subjects("cold_sync") {
		if s.Method == bench.BareMethod {
			bares = append(bares, s)
		}
	}
	if len(bares) == 0 {
		return
	}
	heading(w, h, "svclab's overhead over a bare apply")
	fmt.Fprintf(w, "Cold sync of N Services from empty by svclab's proxier, and a bare apply of the rules it wrote by the mode's own program (iptables-restore), on the same node in the same run: up to %d of each, alternating, while a cold sync takes under a second, else one of each (p50). own is the parts of svclab's sync that compute and write the rules; the other parts are its own accounting of the rest.\n\n", a.r.Config.OverheadPairs)
	for _, bare := range bares {
		var parts []string
		for _, e := range a.es {
			for _, n := range a.ns {
				if s, ok := a.coldSubject(bare, n, e); ok {
					for _, p := range a.partNames(s, "cold") {
						if !slices.Contains(parts, p) {
							parts = append(parts, p)
						}
					}
				}
			}
		}
		head := append([]string{"mode/backend", "E", "N", "svclab sync", "own"}, parts...)
		t := newTable(append(head, "bare apply", "own ratio", "whole ratio")...)
		for _, e := range a.es {
			for _, n := range a.ns {
				s, whole, own, ok := a.overheadRatios(bare, n, e)
				if !ok {
					continue
				}
				cells := []string{modeBackend(bare), fmt.Sprint(e), fmt.Sprint(n), fmtSeconds(a.p(s, n, e, "cold_sync", 0.5)), fmtSeconds(a.p(s, n, e, "cold_own", 0.5))}
				for _, p := range parts {
					cells = append(cells, fmtSeconds(a.p(s, n, e, "cold_part_"+p, 0.5)))
				}
				t.add(append(cells, fmtSeconds(a.p(bare, n, e, "cold_sync", 0.5)), fmt.Sprintf("%.3f", own), fmt.Sprintf("%.3f", whole))...)
			}
		}
		t.write(w)
		fmt.Fprintln(w)
	}
}

// writeParts shows where syncs spent their time, by the proxiers' own
// accounting.
func (a *analysis) writeParts(w io.Writer, h int) {
	titles := map[string]string{"cold": "cold sync", "change": "change one Service's endpoints", "add": "add one Service"}
	wrote := false
	for _, phase := range []string{"cold", "change", "add"} {
		for _, s := range a.subjects(phase + "_sync") {
			names := a.partNames(s, phase)
			if len(names) == 0 {
				continue
			}
			if !wrote {
				heading(w, h, "Where a sync's time goes")
				fmt.Fprintln(w, "The parts each proxier reports of its own syncs (p50 over the repetitions), beside the sync as the bench timed it. iptables: generate (svclab computing the rules and the restore input), setup (single iptables calls ensuring chains and jumps, on full syncs), save (iptables-save looking for stale chains), write (iptables-restore, or the per-rule calls), conntrack (stale UDP entries). IPVS: iptables (its single iptables calls and iptables-restore, on every sync), ipvs (virtual and real servers, addresses on kube-ipvs0), ipsets, conntrack.")
				wrote = true
			}
			fmt.Fprintf(w, "\n%s, %s:\n\n", s, titles[phase])
			t := newTable(append([]string{"N", "E", "sync p50"}, names...)...)
			for _, e := range a.es {
				for _, n := range a.sizes(s, e, phase+"_sync") {
					cells := []string{fmt.Sprint(n), fmt.Sprint(e), fmtSeconds(a.p(s, n, e, phase+"_sync", 0.5))}
					for _, name := range names {
						cells = append(cells, fmtSeconds(a.p(s, n, e, phase+"_part_"+name, 0.5)))
					}
					t.add(cells...)
				}
			}
			t.write(w)
		}
	}
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "nothing (it stopped after its last lab)"
	}
	return strings.Join(v, ", ")
}
