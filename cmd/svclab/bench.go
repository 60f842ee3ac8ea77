package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/svclab/svclab/internal/outdir"
	"github.com/svclab/svclab/lab/bench"
	"github.com/svclab/svclab/lab/bench/report"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/vm"
)

// benchFlags are `svclab bench`'s flags; lists are comma-separated.
type benchFlags struct {
	services, endpoints     string
	vmServices, vmEndpoints string
	modes, methods          string
	backends                string
	reps, minReps           int
	budget, perRuleCap      time.Duration
	coldCap, deadline       time.Duration
	out                     string
	quick, noVM, vmOnly     bool
	vmTimeout               time.Duration
	vmMemory                int
	// The real kube-proxy beside svclab's proxiers.
	proxyImpl, kubeProxyModes string
	kubeBinary                string
}

// defaultVMMemory is the guest's memory: iptables-restore of a large table
// needs room besides the rules.
const defaultVMMemory = 4096

func newBenchCommand() *cobra.Command {
	var f benchFlags
	host, guest := bench.DefaultConfig(bench.WhereHost), bench.DefaultConfig(bench.WhereVM)
	cmd := &cobra.Command{
		Use:   "bench [--services LIST] [--endpoints LIST] [--modes LIST] [--reps N] [--out DIR] [--quick]",
		Short: "Measure rule-update and data-path latency as Services grow: iptables against IPVS",
		Long: `Program one lab node with N synthetic Services of E endpoints each and measure, for every
proxy mode, variant (iptables: the nft and legacy backends) and method: the cold sync;
changing one Service's endpoints and adding one Service with N present (the sync, and
the network-programming latency: from the start of the update to the first TCP
connection through the changed Service that succeeds, a new connection attempted every
millisecond from a pod); the TCP handshake to the first and the last Service and to a
pod without NAT; rule counts and kernel memory; and svclab's own cost against a bare
apply of the same rules by the mode's own program (iptables-restore).

With --proxy kube-proxy, the real kube-proxy is measured beside them in the same
run, on the same state, in every mode of --kube-proxy-modes (nftables included,
for which svclab has no proxier): one lab per size with a control plane holds the
Services and EndpointSlices, kube-proxy runs in each mode in turn on the node, and
its rows (method kube-proxy) give what it reports of itself in its metrics, read
inside the node (kubeproxy_sync_proxy_rules_duration_seconds,
kubeproxy_network_programming_duration_seconds), beside svclab's time to the first
connection. Its modes this kernel cannot run (IPVS here) run in the VM part.
--quick includes kube-proxy only when --proxy kube-proxy is given.

IPVS needs a kernel with ip_vs. When this kernel lacks it, the modes are compared in
svclab's VM (all of them in the same guest kernel) and the iptables part also runs
natively; the two are reported apart, never mixed: DIR/vm and DIR/host each hold
results.csv (a row per measurement), machine.json, summary.md and plots/*.png, and
DIR/summary.md shows both. DIR must be new, empty or an earlier bench's output:
DIR/.svclab-bench lists the files bench wrote, and only those are ever removed or
rewritten (a file of yours where bench writes is refused, never overwritten). A run
stopped by Ctrl-C or SIGTERM writes what it measured, says so in its summaries and
machine.json, and names the labs that did not run whole.

The default run finishes within 15 minutes on a 2-core machine: each part has a
deadline, each update a time budget (repetitions stop early in slow cells, never
below --min-reps unless one repetition alone exceeds the budget), sizes whose cold
sync would pass --cold-cap are not run, and a method that writes rule by rule (iptables
per-rule) stops where a sync would pass --per-rule-cap; the summary's notes list every
such cut. Flags left unset
take the part's defaults (the VM part's differ where the flag says); --modes alone
measures those modes' methods and variants. Progress goes to stderr.
Timings are never pass/fail: the exit status says whether the run completed and its
output has the expected shape.`,
		Example: `  svclab bench --quick --out /tmp/bench
  svclab bench --out docs/bench
  svclab bench --modes iptables --services 100,1000 --endpoints 2 --no-vm
  svclab bench --proxy kube-proxy --services 1000,5000 --endpoints 2 --out /tmp/bench-kp
  svclab bench --deadline 0 --budget 60s --reps 20 --out /tmp/bench-long   # everything, for hours`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.services, "services", joinInts(host.Services), "numbers of Services (N), comma-separated")
	fs.StringVar(&f.endpoints, "endpoints", joinInts(host.Endpoints), fmt.Sprintf("endpoints per Service (E), comma-separated (VM part: %s)", joinInts(guest.Endpoints)))
	fs.StringVar(&f.vmServices, "vm-services", "", "N for the part run in the VM, if not --services")
	fs.StringVar(&f.vmEndpoints, "vm-endpoints", "", "E for the part run in the VM, if not --endpoints")
	fs.StringVar(&f.modes, "modes", strings.Join(host.Modes, ","), "proxy modes, comma-separated: "+strings.Join(proxy.Modes(), ", "))
	fs.StringVar(&f.methods, "methods", strings.Join(host.Methods, ","), fmt.Sprintf("ways of writing, of whichever mode has them (%s), comma-separated; a mode none of whose methods is listed uses its first (VM part: %s)",
		benchMethodHelp(), strings.Join(guest.Methods, ",")))
	fs.StringVar(&f.backends, "backends", strings.Join(host.Backends, ","), fmt.Sprintf("variants of the modes that have them (%s), comma-separated; a mode none of whose variants is listed runs its first (quick VM part: %s)",
		benchVariantHelp(), strings.Join(bench.QuickConfig(bench.WhereVM).Backends, ",")))
	fs.IntVar(&f.reps, "reps", host.Reps, "repetitions of each update")
	fs.IntVar(&f.minReps, "min-reps", host.MinReps, "fewest repetitions of an update when its budget runs out")
	fs.DurationVar(&f.budget, "budget", host.CellBudget, fmt.Sprintf("time the repetitions of one update at one size may take, 0 for no limit (VM part: %s)", guest.CellBudget))
	fs.DurationVar(&f.coldCap, "cold-cap", host.ColdCap, fmt.Sprintf("longest cold sync; larger sizes of that curve are not run, 0 for no cap (VM part: %s)", guest.ColdCap))
	fs.DurationVar(&f.perRuleCap, "per-rule-cap", host.PerRuleCap, fmt.Sprintf("longest predicted sync a method that writes rule by rule (iptables per-rule) is run for (VM part: %s)", guest.PerRuleCap))
	fs.DurationVar(&f.deadline, "deadline", host.Deadline, fmt.Sprintf("time for one part; steps not started by then are not run, 0 for none (VM part: %s)", guest.Deadline))
	fs.StringVar(&f.out, "out", "svclab-bench", "directory for the results")
	fs.BoolVar(&f.quick, "quick", false, "smoke run in about a minute: small sizes, few repetitions (flags given explicitly still apply)")
	fs.BoolVar(&f.noVM, "no-vm", false, "never use svclab's VM: every mode must run on this kernel")
	fs.BoolVar(&f.vmOnly, "vm-only", false, "run only the part in svclab's VM")
	fs.DurationVar(&f.vmTimeout, "vm-timeout", 40*time.Minute, "hard limit for the VM part, boot included")
	fs.IntVar(&f.vmMemory, "vm-memory", defaultVMMemory, "guest memory in MiB")
	fs.StringVar(&f.proxyImpl, "proxy", proxySvclab, "svclab (svclab's own proxiers only) or kube-proxy (the real kube-proxy too, beside them, in the modes of --kube-proxy-modes)")
	fs.StringVar(&f.kubeProxyModes, "kube-proxy-modes", strings.Join(proxy.Modes(), ","), "with --proxy kube-proxy: the modes kube-proxy is measured in, comma-separated")
	fs.StringVar(&f.kubeBinary, "kube-binary", "", "the svclab-kube binary of the Kubernetes components (default: built from components/ on first use and cached)")
	return cmd
}

// benchConfig is one part's configuration: the part's defaults (quick or
// not), overridden by the flags given explicitly.
func benchConfig(fs *pflag.FlagSet, f benchFlags, where string) (bench.Config, error) {
	c := bench.DefaultConfig(where)
	if f.quick {
		c = bench.QuickConfig(where)
	}
	vmPart := where == bench.WhereVM && !inGuest()
	var err error
	switch {
	case vmPart && f.vmServices != "":
		c.Services, err = intList("vm-services", f.vmServices)
	case fs.Changed("services"):
		c.Services, err = intList("services", f.services)
	}
	if err != nil {
		return c, err
	}
	switch {
	case vmPart && f.vmEndpoints != "":
		c.Endpoints, err = intList("vm-endpoints", f.vmEndpoints)
	case fs.Changed("endpoints"):
		c.Endpoints, err = intList("endpoints", f.endpoints)
	}
	if err != nil {
		return c, err
	}
	if fs.Changed("modes") {
		c.SetModes(splitList(f.modes))
	}
	if fs.Changed("methods") {
		c.Methods = splitList(f.methods)
	}
	if fs.Changed("backends") {
		c.Backends = splitList(f.backends)
	}
	if fs.Changed("reps") {
		c.Reps = f.reps
	}
	if fs.Changed("min-reps") {
		c.MinReps = f.minReps
	}
	if fs.Changed("budget") {
		c.CellBudget = f.budget
	}
	if fs.Changed("cold-cap") {
		c.ColdCap = f.coldCap
	}
	if fs.Changed("per-rule-cap") {
		c.PerRuleCap = f.perRuleCap
	}
	if fs.Changed("deadline") {
		c.Deadline = f.deadline
	}
	switch f.proxyImpl {
	case proxySvclab:
	case proxyKubeProxy:
		c.KubeProxyModes, c.KubeBinary = splitList(f.kubeProxyModes), f.kubeBinary
	default:
		return c, fmt.Errorf("--proxy %q: want %s or %s", f.proxyImpl, proxySvclab, proxyKubeProxy)
	}
	c.Log = os.Stderr
	return c, c.Validate()
}

// benchMethodHelp lists each measurable mode's methods.
func benchMethodHelp() string {
	return eachBenchMode(func(m proxy.Mode) []string { return m.Methods })
}

// benchVariantHelp lists each measurable mode's variants.
func benchVariantHelp() string {
	return eachBenchMode(func(m proxy.Mode) []string {
		names := make([]string, len(m.Variants))
		for i, v := range m.Variants {
			names[i] = v.Name
		}
		return names
	})
}

// eachBenchMode is "mode: a, b; ..." over the modes the bench measures by
// default that have any of what list gives.
func eachBenchMode(list func(proxy.Mode) []string) string {
	var parts []string
	for _, name := range bench.DefaultConfig(bench.WhereHost).Modes {
		if m, err := proxy.Lookup(name); err == nil && len(list(m)) > 0 {
			parts = append(parts, name+": "+strings.Join(list(m), ", "))
		}
	}
	return strings.Join(parts, "; ")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intList(name, s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("--%s: %q is not a number", name, p)
		}
		out = append(out, n)
	}
	return out, nil
}

// inGuest tells whether this process runs in svclab's VM.
func inGuest() bool { return os.Getenv("SVCLAB_VM") == "1" }

func runBench(cmd *cobra.Command, f benchFlags) (err error) {
	fs := cmd.Flags()
	if err := privileged(""); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	command := "svclab " + strings.Join(os.Args[1:], " ")

	if inGuest() {
		// The part run in the VM writes its record (the host collects /out as
		// DIR/vm, and draws it with the rest).
		c, err := benchConfig(fs, f, bench.WhereVM)
		if err != nil {
			return usage(err)
		}
		if err := runBenchPart(ctx, c, f.out, command); err != nil {
			return err
		}
		return report.CheckRecord(f.out)
	}

	plan, err := planBench(f)
	if err != nil {
		return usage(err)
	}
	// The output is claimed before anything is spent: bench writes only a
	// new or empty directory or its own earlier output, whose files (and only
	// those) it removes, so that a part left from an earlier run is never
	// shown as this run's.
	out, err := claimBenchOut(f.out)
	if err != nil {
		return usage(fmt.Errorf("--out: %w", err))
	}
	defer func() { err = errors.Join(err, out.Finish()) }()
	if f.proxyImpl == proxyKubeProxy {
		// The components run from one binary, here and in the VM: found (or
		// built, with progress) once, before anything is measured.
		bin, err := kube.Binary(ctx, kube.Options{Path: f.kubeBinary, Log: os.Stderr})
		if err != nil {
			return err
		}
		f.kubeBinary = bin
	}
	if !plan.useVM {
		// Every mode runs here: one part, on this kernel.
		c, err := benchConfig(fs, f, bench.WhereHost)
		if err != nil {
			return usage(err)
		}
		c.KubeProxyModes = plan.hostKP
		err = runBenchPart(ctx, c, filepath.Join(f.out, bench.WhereHost), command)
		return finishBench(f.out, command, err, notRunParts(ctx, f.out, map[string]string{bench.WhereHost: "every mode, natively"}))
	}
	return runBenchVMAndHost(ctx, fs, f, plan, command)
}

// benchPlan is where a bench run's parts run: natively the modes this kernel
// runs, in svclab's VM the others (all of them with --vm-only).
type benchPlan struct {
	// lacking is what needs the VM, as the messages name it: modes, and
	// kube-proxy's modes as "kube-proxy MODE".
	lacking []string
	useVM   bool
	// hostModes and hostKP are svclab's and kube-proxy's modes run natively;
	// vmKP kube-proxy's run in the VM (svclab's VM part runs every mode).
	hostModes, hostKP, vmKP []string
}

// planBench splits the modes of f (svclab's, and kube-proxy's with --proxy
// kube-proxy) into those this kernel runs and those that need the VM, and
// checks the flags that choose between them.
func planBench(f benchFlags) (benchPlan, error) {
	native, missing, err := splitAvailable(splitList(f.modes))
	if err != nil {
		return benchPlan{}, err
	}
	if f.proxyImpl != proxySvclab && f.proxyImpl != proxyKubeProxy {
		return benchPlan{}, fmt.Errorf("--proxy %q: want %s or %s", f.proxyImpl, proxySvclab, proxyKubeProxy)
	}
	// The real kube-proxy's modes split the same way.
	var kpNative, kpMissing []string
	if f.proxyImpl == proxyKubeProxy {
		if kpNative, kpMissing, err = splitAvailable(splitList(f.kubeProxyModes)); err != nil {
			return benchPlan{}, fmt.Errorf("--kube-proxy-modes: %w", err)
		}
	}
	p := benchPlan{lacking: append(slices.Clone(missing), kubeProxyLabels(kpMissing)...)}
	if f.vmOnly && f.noVM {
		return benchPlan{}, errors.New("--vm-only and --no-vm contradict each other")
	}
	p.useVM = len(p.lacking) > 0 || f.vmOnly
	if p.useVM && f.noVM {
		return benchPlan{}, fmt.Errorf("modes %s cannot run on this kernel and --no-vm forbids svclab's VM", strings.Join(p.lacking, ", "))
	}
	// kube-proxy runs in the VM in the modes this kernel cannot run (or all,
	// with --vm-only).
	p.vmKP = kpMissing
	if f.vmOnly {
		p.vmKP = append(kpNative, kpMissing...)
	} else {
		p.hostModes, p.hostKP = native, kpNative
	}
	return p, nil
}

// splitAvailable splits modes into those this kernel runs and those it does
// not; an unknown mode is an error.
func splitAvailable(modes []string) (native, missing []string, err error) {
	for _, m := range modes {
		mode, err := proxy.Lookup(m)
		if err != nil {
			return nil, nil, err
		}
		if err := mode.Available(); err != nil {
			missing = append(missing, m)
			continue
		}
		native = append(native, m)
	}
	return native, missing, nil
}

// runBenchVMAndHost runs the VM part, then the host part if the plan has one,
// each into its own directory of f.out, and reports them apart.
func runBenchVMAndHost(ctx context.Context, fs *pflag.FlagSet, f benchFlags, plan benchPlan, command string) error {
	// Check both configurations before spending any time. The VM part compares
	// every mode asked for (or the defaults).
	vmConf, err := benchConfig(fs, f, bench.WhereVM)
	if err != nil {
		return usage(fmt.Errorf("VM part: %w", err))
	}
	vmConf.KubeProxyModes = plan.vmKP
	hostPart := len(plan.hostModes)+len(plan.hostKP) > 0
	var hostConf bench.Config
	if hostPart {
		if hostConf, err = benchConfig(fs, f, bench.WhereHost); err != nil {
			return usage(fmt.Errorf("host part: %w", err))
		}
		hostConf.SetModes(plan.hostModes)
		hostConf.KubeProxyModes = plan.hostKP
	}
	why := "--vm-only"
	if len(plan.lacking) > 0 {
		why = "this kernel cannot run " + strings.Join(plan.lacking, ", ")
	}
	fmt.Fprintf(os.Stderr, "svclab: %s: comparing %s in svclab's VM (one guest kernel), then %s natively; reported apart\n",
		why, strings.Join(append(slices.Clone(vmConf.Modes), kubeProxyLabels(vmConf.KubeProxyModes)...), ", "),
		joinOr(append(slices.Clone(plan.hostModes), kubeProxyLabels(plan.hostKP)...), ", ", "nothing"))
	// A failed VM part does not stop the host part (unless the run was
	// stopped): what it measures is reported, and the run still fails.
	planned := map[string]string{bench.WhereVM: "every mode in svclab's VM"}
	if hostPart {
		planned[bench.WhereHost] = strings.Join(append(slices.Clone(plan.hostModes), kubeProxyLabels(plan.hostKP)...), ", ") + " natively"
	}
	err = runBenchInVM(ctx, f, vmConf, command)
	if err != nil && ctx.Err() != nil {
		return finishBench(f.out, command, err, notRunParts(ctx, f.out, planned))
	}
	if hostPart {
		err = errors.Join(err, runBenchPart(ctx, hostConf, filepath.Join(f.out, bench.WhereHost), command))
	}
	return finishBench(f.out, command, err, notRunParts(ctx, f.out, planned))
}

// benchManifest lists, in a bench's output directory, the files bench wrote.
const benchManifest = ".svclab-bench"

// claimBenchOut claims dir for bench's output: bench writes the combined
// summary and each part's directory.
func claimBenchOut(dir string) (*outdir.Dir, error) {
	return outdir.Claim(dir, benchManifest, func(rel string) bool {
		first, _, _ := strings.Cut(rel, "/")
		return rel == report.SummaryFile || slices.Contains(report.Parts, first)
	})
}

// kubeProxyLabels name kube-proxy's modes as the progress says them.
func kubeProxyLabels(modes []string) []string {
	out := make([]string, len(modes))
	for i, m := range modes {
		out[i] = "kube-proxy " + m
	}
	return out
}

// runBenchPart runs one part on this kernel and writes its record. A run that
// failed part-way still writes what it measured, then fails.
func runBenchPart(ctx context.Context, c bench.Config, dir, command string) error {
	rep, err := bench.Run(ctx, c)
	if rep == nil {
		return err
	}
	rep.Command = command
	if werr := report.WriteRecord(dir, rep); werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Fprintf(os.Stderr, "svclab: bench (%s) wrote %s in %s\n", c.Where, dir, rep.Elapsed.Round(time.Second))
	return err
}

// runBenchInVM runs the VM part: this binary, `bench` with the VM part's
// settings, in svclab's VM; the guest's /out becomes DIR/vm.
func runBenchInVM(ctx context.Context, f benchFlags, c bench.Config, command string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// Every setting is passed explicitly: the guest must not pick its own.
	args := []string{"svclab", "bench", "--out", "/out",
		"--services", joinInts(c.Services), "--endpoints", joinInts(c.Endpoints),
		"--modes", strings.Join(c.Modes, ","), "--methods", strings.Join(c.Methods, ","),
		"--backends", strings.Join(c.Backends, ","),
		"--reps", strconv.Itoa(c.Reps), "--min-reps", strconv.Itoa(c.MinReps),
		"--budget", c.CellBudget.String(), "--per-rule-cap", c.PerRuleCap.String(),
		"--cold-cap", c.ColdCap.String(), "--deadline", c.Deadline.String()}
	if f.quick {
		args = append(args, "--quick")
	}
	files := map[string]string{"bin/svclab": self}
	if len(c.KubeProxyModes) > 0 {
		// The guest runs the host's component binary.
		files["bin/svclab-kube"] = f.kubeBinary
		args = append(args, "--proxy", proxyKubeProxy, "--kube-proxy-modes", strings.Join(c.KubeProxyModes, ","),
			"--kube-binary", "/svclab/bin/svclab-kube")
	}
	dir := filepath.Join(f.out, bench.WhereVM)
	loadStart := bench.LoadAvg()
	res, err := vm.Execute(ctx, vm.Config{
		Command: args,
		Files:   files,
		OutDir:  dir, Timeout: f.vmTimeout, MemoryMiB: f.vmMemory,
		Stdout: os.Stdout, Stderr: os.Stderr, Log: os.Stderr,
	})
	if err != nil {
		return fmt.Errorf("svclab's VM: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("bench in svclab's VM exited %d", res.ExitCode)
	}
	// The guest cannot know how it was run: record the accelerator and the
	// command given on the host.
	rep, err := report.Load(dir)
	if err != nil {
		return fmt.Errorf("VM part: %w", err)
	}
	rep.Machine.Accel = res.Accel
	rep.Machine.HostLoad = loadStart + " at the start, " + bench.LoadAvg() + " at the end"
	rep.Command = command + "  (in the VM: " + strings.Join(args, " ") + ")"
	return report.WriteRecord(dir, rep)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// notRunParts names, when the run was interrupted, each part planned (part:
// what it measures) that recorded nothing; a part that recorded says itself
// what it did not run.
func notRunParts(ctx context.Context, out string, planned map[string]string) []string {
	if ctx.Err() == nil {
		return nil
	}
	var notes []string
	for _, p := range report.Parts {
		what, ok := planned[p]
		if _, err := os.Stat(filepath.Join(out, p, report.ResultsFile)); ok && err != nil {
			notes = append(notes, fmt.Sprintf("**Interrupted**: the %s part (%s) did not run or sent nothing.", p, what))
		}
	}
	return notes
}

// finishBench draws what the parts recorded (each plot once) and writes the
// combined summary, also when a part failed (runErr), so that what was
// measured is shown; then it checks the output's shape, unless a part failed.
// notes are said first in the combined summary.
func finishBench(out, command string, runErr error, notes []string) error {
	recorded := slices.ContainsFunc(report.Parts, func(p string) bool {
		_, err := os.Stat(filepath.Join(out, p, report.ResultsFile))
		return err == nil
	})
	if !recorded && runErr != nil {
		return runErr
	}
	if err := report.Publish(out, command, notes...); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return runErr
	}
	if err := report.CheckOutput(out); err != nil {
		return fmt.Errorf("bench output in %s is incomplete:\n%w", out, err)
	}
	fmt.Fprintf(os.Stderr, "svclab: bench results in %s (summary: %s)\n", out, filepath.Join(out, report.SummaryFile))
	return nil
}
