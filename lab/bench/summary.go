package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Targets of the issue, reported (never test thresholds).
const (
	// OverheadTarget is the largest acceptable ratio of svclab's cold sync to a
	// bare iptables-restore of the same input.
	OverheadTarget = 1.10
	// IPVSAddExponentTarget bounds the growth exponent of IPVS's add-one sync.
	IPVSAddExponentTarget = 0.2
)

// fmtSeconds prints a duration in the unit that suits it.
func fmtSeconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v < 1e-3:
		return fmt.Sprintf("%.0f µs", v*1e6)
	case v < 1:
		return fmt.Sprintf("%.3g ms", v*1e3)
	default:
		return fmt.Sprintf("%.3g s", v)
	}
}

func heading(w io.Writer, level int, text string) {
	fmt.Fprintf(w, "\n%s %s\n\n", strings.Repeat("#", level), text)
}

// p is the q-quantile of a series, NaN when empty.
func (sr *series) p(s subject, n, e int, metric string, q float64) float64 {
	return Percentile(sr.get(s, n, e, metric), q)
}

// fit is the growth exponent of metric's p50 over N for one subject and E,
// over every size measured.
func (sr *series) fit(s subject, e int, metric string) (Fit, bool) {
	xs, ys := sr.curve(s, e, metric)
	return FitPowerLaw(xs, ys)
}

// fitLast is the slope between the two largest sizes: where a curve that is a
// constant plus a growing part is headed.
func (sr *series) fitLast(s subject, e int, metric string) (Fit, bool) {
	xs, ys := sr.curve(s, e, metric)
	if len(xs) > 2 {
		xs, ys = xs[len(xs)-2:], ys[len(ys)-2:]
	}
	return FitPowerLaw(xs, ys)
}

// curve is metric's p50 at each size measured.
func (sr *series) curve(s subject, e int, metric string) (xs, ys []float64) {
	ns, _ := sr.sizes()
	for _, n := range ns {
		if v := sr.get(s, n, e, metric); len(v) > 0 {
			xs = append(xs, float64(n))
			ys = append(ys, Percentile(v, 0.5))
		}
	}
	return xs, ys
}

func fmtFit(f Fit, ok bool) string {
	if !ok {
		return "–"
	}
	if f.Points == 2 {
		return fmt.Sprintf("%.2f (2 sizes)", f.Exponent)
	}
	return fmt.Sprintf("%.2f (R² %.2f, %d sizes)", f.Exponent, f.R2, f.Points)
}

// fmtFits is the fit over every size and, when there are more than two, the
// slope between the two largest.
func (sr *series) fmtFits(s subject, e int, metric string) string {
	f, ok := sr.fit(s, e, metric)
	if !ok || f.Points <= 2 {
		return fmtFit(f, ok)
	}
	l, _ := sr.fitLast(s, e, metric)
	return fmt.Sprintf("%.2f (R² %.2f, %d sizes; last two %.2f)", f.Exponent, f.R2, f.Points, l.Exponent)
}

func bareSubject(backend string) subject { return subject{"iptables", "bare-restore", backend} }

// coldSubject is the iptables subject whose proxier made the measured cold
// sync (the one with its parts recorded) at a size.
func (sr *series) coldSubject(backend string, n, e int) (subject, bool) {
	for _, s := range sr.subjects("cold_write") {
		if s.backend == backend && len(sr.get(s, n, e, "cold_write")) > 0 {
			return s, true
		}
	}
	return subject{}, false
}

// writeSummary writes the report as Markdown, its top heading at level h; plot
// paths are prefixed with prefix (for a summary that sits above the report's
// directory).
func (r *Report) writeSummary(w io.Writer, h int, prefix string, plots []plotFile) {
	sr := newSeries(r.Rows)
	ns, es := sr.sizes()
	where := "natively, on this machine's kernel"
	if r.Machine.Where == WhereVM {
		where = "in svclab's VM, every mode in the same guest kernel"
	}
	fmt.Fprintf(w, "%s svclab bench: %s\n\n", strings.Repeat("#", h), where)
	r.writeMachine(w)

	heading(w, h+1, "Targets")
	r.writeTargets(w, sr, es)

	heading(w, h+1, "Growth exponents")
	fmt.Fprintln(w, "Slope of log(p50) against log(N), least squares over the sizes measured: 0 is flat, 1 linear, 2 quadratic. Most curves are a fixed cost plus a growing one, so the slope between the two largest sizes (\"last two\") says more about large clusters than the fit over all.")
	fmt.Fprintln(w)
	metrics := []string{"cold_sync", "add_sync", "add_programming", "change_sync", "change_programming"}
	fmt.Fprintln(w, "| mode/method/backend | E | "+strings.Join(metrics, " | ")+" |")
	fmt.Fprintln(w, "|---|---|"+strings.Repeat("---|", len(metrics)))
	for _, e := range es {
		for _, s := range sr.subjects("") {
			cells := make([]string, len(metrics))
			seen := false
			for i, m := range metrics {
				_, ok := sr.fit(s, e, m)
				cells[i] = sr.fmtFits(s, e, m)
				seen = seen || ok
			}
			if seen {
				fmt.Fprintf(w, "| %s | %d | %s |\n", s, e, strings.Join(cells, " | "))
			}
		}
	}

	heading(w, h+1, "Cold sync: N Services from empty (p50)")
	fmt.Fprintln(w, "The first sync of every restore method (full, partial, changed) writes everything with one iptables-restore; the table shows it under the method that ran it. iptables/bare-restore is iptables-restore alone fed the very same input; per-rule is one iptables call per chain and rule.")
	for _, e := range es {
		fmt.Fprintf(w, "\nE=%d endpoints per Service:\n\n", e)
		r.sizeTable(w, sr, e, ns, "cold_sync")
	}
	if len(sr.subjects("restart_sync")) > 0 {
		fmt.Fprintln(w, "\nkube-proxy restarting on a programmed node: a new proxier's first sync, which writes everything over the rules already there (p50):")
		for _, e := range es {
			fmt.Fprintf(w, "\nE=%d:\n\n", e)
			r.sizeTable(w, sr, e, ns, "restart_sync")
		}
	}

	for _, ph := range []struct {
		p     phase
		title string
		how   string
	}{
		{phaseAdd, "Add one Service with N present", "Additions accumulate: repetition k adds a Service with N+k present (the added Services sort last in KUBE-SERVICES)."},
		{phaseChange, "Change one Service's endpoints with N present", "Each repetition moves the endpoints of another probe Service from closed ports of the backend pods to open ones."},
	} {
		heading(w, h+1, ph.title)
		fmt.Fprintf(w, "%s sync: the proxier's Sync call. programming: network-programming latency, from the start of the update to the first TCP connection through the changed Service that succeeded, a new connection attempted every %s from a pod. rules written: what the sync wrote (iptables).\n",
			ph.how, r.Config.ProbeInterval)
		for _, e := range es {
			fmt.Fprintf(w, "\nE=%d:\n\n", e)
			fmt.Fprintln(w, "| mode/method/backend | N | sync p50 | sync p90 | sync p99 | programming p50 | p90 | p99 | reps | failed | rules written |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
			for _, s := range sr.subjects(ph.p.name + "_sync") {
				for _, n := range ns {
					syncs := sr.get(s, n, e, ph.p.name+"_sync")
					if len(syncs) == 0 {
						continue
					}
					prog := sr.get(s, n, e, ph.p.name+"_programming")
					failed := len(sr.get(s, n, e, ph.p.name+"_failed"))
					written := "–"
					if v := sr.get(s, n, e, ph.p.name+"_rules_written"); len(v) > 0 {
						written = fmt.Sprintf("%.0f", Percentile(v, 0.5))
					}
					fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %d | %d | %s |\n", s, n,
						fmtSeconds(Percentile(syncs, 0.5)), fmtSeconds(Percentile(syncs, 0.9)), fmtSeconds(Percentile(syncs, 0.99)),
						fmtSeconds(Percentile(prog, 0.5)), fmtSeconds(Percentile(prog, 0.9)), fmtSeconds(Percentile(prog, 0.99)),
						len(syncs), failed, written)
				}
			}
		}
	}

	r.writeParts(w, h+1, sr, ns, es)

	heading(w, h+1, "Data path: TCP handshake from a pod")
	fmt.Fprintf(w, "Connect time (SYN to established, around connect(2) in the client pod) to the first and the last Service in the table and straight to a backend pod (no NAT), %d connections to each, interleaved; baseline: straight to the pod before the node had any rule. iptables walks KUBE-SERVICES in order for the first packet of every connection, and with a bridge CNI (br_netfilter) that includes pod-to-pod connections on the node; IPVS finds the virtual server in a hash table.\n\n", r.Config.Connects)
	fmt.Fprintln(w, "| mode/backend | N | E | first p50 | first p99 | last p50 | last p99 | pod p50 | pod p99 | baseline p50 | baseline p99 | last − baseline (p50) | failed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, e := range es {
		for _, s := range sr.subjects("connect_last") {
			for _, n := range ns {
				last := sr.get(s, n, e, "connect_last")
				if len(last) == 0 {
					continue
				}
				first, pod := sr.get(s, n, e, "connect_first"), sr.get(s, n, e, "connect_pod")
				base := sr.get(s, n, e, "connect_baseline")
				label := s.mode
				if s.backend != "" {
					label += "/" + s.backend
				}
				failed := 0.0
				for _, m := range []string{"connect_first", "connect_last", "connect_pod", "connect_baseline"} {
					for _, v := range sr.get(s, n, e, m+"_failures") {
						failed += v
					}
				}
				fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f |\n", label, n, e,
					fmtSeconds(Percentile(first, 0.5)), fmtSeconds(Percentile(first, 0.99)),
					fmtSeconds(Percentile(last, 0.5)), fmtSeconds(Percentile(last, 0.99)),
					fmtSeconds(Percentile(pod, 0.5)), fmtSeconds(Percentile(pod, 0.99)),
					fmtSeconds(Percentile(base, 0.5)), fmtSeconds(Percentile(base, 0.99)),
					signedSeconds(Percentile(last, 0.5)-Percentile(base, 0.5)), failed)
			}
		}
	}

	heading(w, h+1, "Rules and kernel memory")
	fmt.Fprintln(w, "rules and chains: what svclab generated (filter and nat); kernel rules: -A lines iptables-save prints for filter, nat and mangle after the cold sync; virtual and real servers: /proc/net/ip_vs of the node. kernel memory: the change of SUnreclaim + VmallocUsed + Percpu in /proc/meminfo across the first cold sync (machine-wide; on a shared host other work adds noise of a few MB either way).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode/method/backend | N | E | rules | chains | kernel rules | virtual servers | real servers | kernel memory | per rule or real server |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, e := range es {
		for _, s := range sr.subjects("kernel_memory") {
			for _, n := range ns {
				mem := sr.get(s, n, e, "kernel_memory")
				if len(mem) == 0 {
					continue
				}
				count := func(m string) string {
					if v := sr.get(s, n, e, m); len(v) > 0 {
						return fmt.Sprintf("%.0f", v[0])
					}
					return "–"
				}
				per := "–"
				units := sr.get(s, n, e, "rules")
				if len(units) == 0 {
					units = sr.get(s, n, e, "real_servers")
				}
				if len(units) > 0 && units[0] > 0 {
					per = fmt.Sprintf("%.0f B", mem[0]/units[0])
				}
				fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %.1f MiB | %s |\n", s, n, e,
					count("rules"), count("chains"), count("kernel_rules"), count("virtual_servers"), count("real_servers"),
					mem[0]/(1<<20), per)
			}
		}
	}

	r.writeOverhead(w, h+1, sr, ns, es)

	heading(w, h+1, "Notes: what was cut short or failed")
	if len(r.Notes) == 0 {
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

func signedSeconds(v float64) string {
	if v < 0 {
		return "−" + fmtSeconds(-v)
	}
	return "+" + fmtSeconds(v)
}

func (r *Report) writeMachine(w io.Writer) {
	m := r.Machine
	fmt.Fprintln(w, "| | |")
	fmt.Fprintln(w, "|---|---|")
	fmt.Fprintf(w, "| where | %s |\n", m.Where)
	fmt.Fprintf(w, "| kernel | %s |\n", m.Kernel)
	keys := make([]string, 0, len(m.IPTables))
	for k := range m.IPTables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "| iptables (%s) | %s |\n", k, m.IPTables[k])
	}
	fmt.Fprintf(w, "| CPU | %s × %d%s |\n", m.CPU, m.CPUs, map[bool]string{true: " (hypervisor)", false: ""}[m.Hypervisor])
	if m.Accel != "" {
		fmt.Fprintf(w, "| VM accelerator | %s |\n", m.Accel)
	}
	fmt.Fprintf(w, "| memory | %d MiB |\n", m.MemoryMiB)
	if m.LoadStart != "" {
		fmt.Fprintf(w, "| load average (1, 5, 15 min) | %s at the start, %s at the end |\n", m.LoadStart, m.LoadEnd)
	}
	if m.HostLoad != "" {
		fmt.Fprintf(w, "| host's load average around the VM | %s |\n", m.HostLoad)
	}
	fmt.Fprintf(w, "| kube-proxy rules reproduced | %s |\n", m.KubeProxy)
	fmt.Fprintf(w, "| Go | %s |\n", m.GoVersion)
	if r.Command != "" {
		fmt.Fprintf(w, "| command | `%s` |\n", r.Command)
	}
	c := r.Config
	fmt.Fprintf(w, "| sizes | N %s; E %s |\n", ints(c.Services), ints(c.Endpoints))
	fmt.Fprintf(w, "| repetitions | %d per update (at least %d when one costs more than the %s cell budget); %d cold-sync pairs; %d connections per data-path target |\n",
		c.Reps, c.MinReps, c.CellBudget, c.OverheadPairs, c.Connects)
	fmt.Fprintf(w, "| prober | an attempt every %s, each given up after %s, %d at once at most |\n", c.ProbeInterval, c.AttemptTimeout, c.ProbeWorkers)
	fmt.Fprintf(w, "| started | %s |\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "| took | %s |\n", r.Elapsed.Round(1e9))
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// sizeTable is one metric's p50 with a column per N.
func (r *Report) sizeTable(w io.Writer, sr *series, e int, ns []int, metric string) {
	fmt.Fprint(w, "| mode/method/backend |")
	for _, n := range ns {
		fmt.Fprintf(w, " N=%d |", n)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "|---|"+strings.Repeat("---|", len(ns)))
	for _, s := range sr.subjects(metric) {
		cells := make([]string, len(ns))
		seen := false
		for i, n := range ns {
			v := sr.get(s, n, e, metric)
			cells[i] = fmtSeconds(Percentile(v, 0.5))
			seen = seen || len(v) > 0
		}
		if seen {
			fmt.Fprintf(w, "| %s | %s |\n", s, strings.Join(cells, " | "))
		}
	}
}

// overheadRatios compare a cold sync by svclab's proxier with bare
// iptables-restore of the same input (p50 against p50): whole is the whole
// sync, own only svclab's own part of it (computing the rules and the input,
// and its iptables-restore), leaving out what kube-proxy itself does besides
// the restore (single iptables calls ensuring jumps, iptables-save, conntrack
// cleanup).
func overheadRatios(sr *series, backend string, n, e int) (whole, own float64, ok bool) {
	s, ok := sr.coldSubject(backend, n, e)
	if !ok {
		return 0, 0, false
	}
	sync, bare := sr.get(s, n, e, "cold_sync"), sr.get(bareSubject(backend), n, e, "cold_sync")
	if len(sync) == 0 || len(bare) == 0 {
		return 0, 0, false
	}
	b := Percentile(bare, 0.5)
	ownPart := sr.p(s, n, e, "cold_generate", 0.5) + sr.p(s, n, e, "cold_write", 0.5)
	return Percentile(sync, 0.5) / b, ownPart / b, true
}

func (r *Report) writeTargets(w io.Writer, sr *series, es []int) {
	ns, _ := sr.sizes()
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	wrote := false
	for _, b := range r.Config.Backends {
		for _, e := range es {
			var wholes, owns []string
			var largestN int
			largestWhole, largestOwn := 0.0, 0.0
			for _, n := range ns {
				if whole, own, ok := overheadRatios(sr, b, n, e); ok {
					wholes = append(wholes, fmt.Sprintf("N=%d %.3f", n, whole))
					owns = append(owns, fmt.Sprintf("N=%d %.3f", n, own))
					largestN, largestWhole, largestOwn = n, whole, own
				}
			}
			if len(wholes) == 0 {
				continue
			}
			wrote = true
			fmt.Fprintf(w, "- svclab's overhead over bare `iptables-restore --noflush` of the same input, %s, E=%d (target ≤ %.2f), at the largest N measured (%d): "+
				"svclab's own work (computing the rules and the input, plus its iptables-restore) %.3f, %s; the whole cold sync %.3f, %s. "+
				"Own, by N: %s. Whole, by N: %s. The whole sync also does what kube-proxy does besides the restore, and svclab with it: single iptables calls ensuring chains and jumps (a few ms each on a host, about 0.1 s each in the VM, which dominate small tables), an iptables-save looking for stale chains, the UDP conntrack cleanup.\n",
				b, e, OverheadTarget, largestN, largestOwn, verdict(largestOwn <= OverheadTarget), largestWhole, verdict(largestWhole <= OverheadTarget),
				strings.Join(owns, ", "), strings.Join(wholes, ", "))
		}
	}
	for _, s := range sr.subjects("add_sync") {
		if s.mode != "ipvs" {
			continue
		}
		for _, e := range es {
			f, ok := sr.fit(s, e, "add_sync")
			if !ok {
				continue
			}
			wrote = true
			xs, _ := sr.curve(s, e, "add_sync")
			fmt.Fprintf(w, "- IPVS add-one sync growth exponent, E=%d (target < %.1f up to 10000 Services), measured up to N=%.0f: %.2f, %s; in full %s. Programming latency: %s.\n",
				e, IPVSAddExponentTarget, xs[len(xs)-1], f.Exponent, verdict(f.Exponent < IPVSAddExponentTarget && xs[len(xs)-1] >= 10000),
				sr.fmtFits(s, e, "add_sync"), sr.fmtFits(s, e, "add_programming"))
		}
	}
	for _, e := range es {
		for _, b := range r.Config.Backends {
			var parts []string
			for _, m := range []string{MethodFull, MethodPartial, MethodChanged, MethodPerRule} {
				if _, ok := sr.fit(subject{"iptables", m, b}, e, "add_sync"); ok {
					parts = append(parts, fmt.Sprintf("%s %s", m, sr.fmtFits(subject{"iptables", m, b}, e, "add_sync")))
				}
			}
			if len(parts) > 0 {
				wrote = true
				fmt.Fprintf(w, "- iptables %s add-one sync growth exponents, E=%d (expected: full near 1, partial between full and IPVS): %s\n", b, e, strings.Join(parts, ", "))
			}
		}
	}
	if !wrote {
		fmt.Fprintln(w, "No target could be evaluated: too few sizes or modes in this run.")
	}
}

func (r *Report) writeOverhead(w io.Writer, h int, sr *series, ns, es []int) {
	if len(sr.subjects("cold_write")) == 0 {
		return
	}
	heading(w, h, "svclab's overhead over bare iptables-restore")
	fmt.Fprintf(w, "Cold sync of N Services from empty by svclab's proxier, and bare iptables-restore of the input it wrote, on the same node in the same run: up to %d of each, alternating, while a cold sync takes under a second, else one of each (p50). The parts are svclab's own accounting of its sync.\n\n", r.Config.OverheadPairs)
	fmt.Fprintln(w, "| backend | E | N | svclab sync | its iptables-restore | computing rules | single calls (jumps) | iptables-save | bare iptables-restore | own ratio | whole ratio |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, b := range r.Config.Backends {
		for _, e := range es {
			for _, n := range ns {
				whole, own, ok := overheadRatios(sr, b, n, e)
				if !ok {
					continue
				}
				s, _ := sr.coldSubject(b, n, e)
				fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %.3f | %.3f |\n", b, e, n,
					fmtSeconds(sr.p(s, n, e, "cold_sync", 0.5)), fmtSeconds(sr.p(s, n, e, "cold_write", 0.5)),
					fmtSeconds(sr.p(s, n, e, "cold_generate", 0.5)), fmtSeconds(sr.p(s, n, e, "cold_setup", 0.5)),
					fmtSeconds(sr.p(s, n, e, "cold_save", 0.5)), fmtSeconds(sr.p(bareSubject(b), n, e, "cold_sync", 0.5)), own, whole)
			}
		}
	}
}

// partNames lists the parts recorded under prefix for subject s, sorted.
func (sr *series) partNames(s subject, prefix string) []string {
	seen := map[string]bool{}
	for k := range sr.values {
		if k.s == s {
			if name, ok := strings.CutPrefix(k.metric, prefix+"_part_"); ok {
				seen[name] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// writeParts shows where syncs spent their time, by the proxiers' own
// accounting.
func (r *Report) writeParts(w io.Writer, h int, sr *series, ns, es []int) {
	titles := map[string]string{"cold": "cold sync", "change": "change one Service's endpoints", "add": "add one Service"}
	wrote := false
	for _, prefix := range []string{"cold", "change", "add"} {
		for _, s := range sr.subjects(prefix + "_sync") {
			names := sr.partNames(s, prefix)
			if len(names) == 0 {
				continue
			}
			if !wrote {
				heading(w, h, "Where a sync's time goes")
				fmt.Fprintln(w, "The parts each proxier reports of its own syncs (p50 over the repetitions), beside the sync as the bench timed it. iptables: generate (svclab computing the rules and the restore input), setup (single iptables calls ensuring chains and jumps, on full syncs), save (iptables-save looking for stale chains), write (iptables-restore, or the per-rule calls), conntrack (stale UDP entries). IPVS: iptables (its single iptables calls and iptables-restore, on every sync), ipvs (virtual and real servers, addresses on kube-ipvs0), ipsets, conntrack.")
				wrote = true
			}
			fmt.Fprintf(w, "\n%s, %s:\n\n", s, titles[prefix])
			fmt.Fprintln(w, "| N | E | sync p50 | "+strings.Join(names, " | ")+" |")
			fmt.Fprintln(w, "|---|---|---|"+strings.Repeat("---|", len(names)))
			for _, e := range es {
				for _, n := range ns {
					syncs := sr.get(s, n, e, prefix+"_sync")
					if len(syncs) == 0 {
						continue
					}
					cells := make([]string, len(names))
					for i, name := range names {
						cells[i] = fmtSeconds(sr.p(s, n, e, prefix+"_part_"+name, 0.5))
					}
					fmt.Fprintf(w, "| %d | %d | %s | %s |\n", n, e, fmtSeconds(Percentile(syncs, 0.5)), strings.Join(cells, " | "))
				}
			}
		}
	}
}
