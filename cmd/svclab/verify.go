package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/verify"
	"github.com/svclab/svclab/topologies"
	"github.com/svclab/svclab/vm"
)

// errChecksFailed makes verify exit 1 after it printed its table.
var errChecksFailed = errors.New("some checks failed")

// verifyReport is what --json prints. A plan (--plan) is marked planned: its
// checks have observed nothing and passed none.
type verifyReport struct {
	Passed  bool           `json:"passed"`
	Planned bool           `json:"planned,omitempty"`
	Checks  []verify.Check `json:"checks"`
}

// run is one mode and backend to verify, and its plan.
type run struct {
	label string
	opts  lab.Options
	plan  verify.Plan
}

// verifyFlags are verify's flags.
type verifyFlags struct {
	lab    labFlags
	asJSON bool
	noVM   bool
	plan   bool
	flows  string
	traced bool
	// checkTimeout and heartbeat: see verify.Bounds.
	checkTimeout time.Duration
	heartbeat    time.Duration
}

func newVerifyCommand() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify [-f FILE] [--mode MODE|all] [--flows FLOWS] [--plan] [--json]",
		Short: "Build the lab, check every flow to every Service with real connections, tear down",
		Long: `For every pod, node and client, and every ClusterIP:port and node:nodePort, derive from
the topology what must happen (which backends may answer and the source address they
must see, or refused, or dropped), check it with real connections, print a table and
tear the lab down. Exit status 0 only if every check passed. Every failed check
carries the trace of one failing attempt (as svclab trace prints it): every namespace,
hook and rule it went through, the conntrack entry and how it ended.

--flows FILE checks the flows written in FILE instead (see docs/flows.md).
--plan prints the checks a run would make and what each expects, without root and
without building anything.

Every check runs under a bound (--check-timeout, or its own: the longest its
attempts may take, plus room), past which it fails naming its flow, the member it
runs from and what it waited for (connect, a reply, a DNS answer, ...). While
checks run, a line every --heartbeat on stderr names those still running.

A lab taken down under verify (svclab down, svclab clean --all, or its record or
a namespace removed) ends the run with an error saying so, and who took it.`,
		Example: `  sudo svclab verify                  # web.yaml in iptables-nft
  sudo svclab verify -f lb --mode all
  svclab verify --plan --json -f httpd`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runVerify(cmd.OutOrStdout(), f) },
	}
	f.lab.register(cmd.Flags())
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&f.noVM, "no-vm", false, "never run in svclab's VM, even when this kernel lacks what a mode needs")
	cmd.Flags().BoolVar(&f.plan, "plan", false, "print the checks a run would make and what each expects; builds nothing, needs no root")
	cmd.Flags().BoolVar(&f.traced, "trace", false, "trace one attempt of every check, passing ones too (failed checks always carry one: see svclab trace)")
	cmd.Flags().DurationVar(&f.checkTimeout, "check-timeout", 0, "fail a check still running after this long, naming what it waits for (default: each check's own bound, from its attempts)")
	cmd.Flags().DurationVar(&f.heartbeat, "heartbeat", verify.DefaultHeartbeat, "while checks run, name those still running on stderr this often")
	cmd.Flags().StringVar(&f.flows, "flows", "", "check the flows written in this file (or a shipped one by name: web) instead of every flow of the topology")
	return cmd
}

// runVerify plans every run f asks for; with --plan it prints the plan, else
// it checks the runs this kernel can make here and the others in svclab's VM,
// and prints one report of them all.
func runVerify(out io.Writer, f verifyFlags) error {
	t, err := loadTopology(f.lab.file)
	if err != nil {
		return err
	}
	runs, err := verifyRuns(f.lab, t, f.flows)
	if err != nil {
		return err
	}
	var rep verifyReport
	if f.plan {
		rep.Planned = true
		for _, r := range runs {
			rep.Checks = append(rep.Checks, r.plan.Checks(r.label)...)
		}
		return printReport(out, rep, f.asJSON)
	}
	if err := privileged(""); err != nil {
		return err
	}
	here, inVM, err := splitRuns(runs, f.noVM)
	if err != nil {
		return err
	}
	var log io.Writer = os.Stderr
	dir := record.DefaultDir
	ctx, stop := ownerContext("verify", dir, log)
	defer stop()
	bounds := verify.Bounds{Check: f.checkTimeout, Every: f.heartbeat, Log: log}
	for _, r := range here {
		checks, err := verifyHere(ctx, t, r, f, bounds, dir, log)
		if err != nil {
			return fmt.Errorf("%s: %w", r.label, err)
		}
		rep.Checks = append(rep.Checks, checks...)
	}
	if len(inVM) > 0 {
		checks, err := verifyInVM(f.lab, inVM, f.vmArgs())
		if err != nil {
			return err
		}
		rep.Checks = append(rep.Checks, checks...)
	}
	// A run that checked nothing proved nothing.
	rep.Passed = len(rep.Checks) > 0
	for _, c := range rep.Checks {
		rep.Passed = rep.Passed && c.Passed
	}
	if err := printReport(out, rep, f.asJSON); err != nil {
		return err
	}
	if !rep.Passed {
		return errChecksFailed
	}
	return nil
}

// verifyHere builds t for run r on this kernel, checks its plan (the plan of
// the lab as it came up, when an API server allocated what the file left
// out) and takes the lab down.
func verifyHere(ctx context.Context, t *topology.Topology, r run, f verifyFlags, bounds verify.Bounds, dir string, log io.Writer) ([]verify.Check, error) {
	start := time.Now()
	// The lab's progress, and the death of any component it runs, on
	// stderr.
	r.opts.Log = log
	l, err := lab.Up(ctx, t, r.opts)
	if err != nil {
		return nil, vanishedOr(ctx, err)
	}
	p := r.plan
	if f.flows == "" && l.ControlPlane().Kubeconfig() != "" {
		// The API server allocated what the file left out: the plan
		// follows the lab as it came up.
		if p, err = planFor(l.Topology(), r.opts, ""); err != nil {
			return nil, errors.Join(err, l.Down())
		}
	}
	// A lab whose record or namespaces go under the checks ends them,
	// saying so: its flows fail for that, not for its rules.
	runCtx, cancel := context.WithCancelCause(ctx)
	unwatch := watchLab(runCtx, cancel, dir, l.Record(), "verify")
	fmt.Fprintf(log, "%s: checking %d flows and %d lookups\n", r.label, len(p.Flows), len(p.Lookups))
	checks, err := verify.ExecuteBounded(runCtx, l, p, r.label, bounds)
	if err == nil {
		err = verify.Explain(runCtx, l, p, checks, f.traced, log)
	}
	unwatch()
	checks = append(checks, verify.Deaths(l, r.label)...)
	err = vanishedOr(runCtx, err)
	// Gone between two looks of the watch: its checks and traces failed
	// for that, not for the lab's rules.
	rec := l.Record()
	if v := record.Gone(dir, &rec, "verify"); v != nil && runCtx.Err() == nil {
		err = v
	}
	cancel(nil)
	if err := errors.Join(err, l.Down()); err != nil {
		return nil, err
	}
	passed := 0
	for _, c := range checks {
		if c.Passed {
			passed++
		}
	}
	fmt.Fprintf(log, "%s: %d of %d checks passed in %s\n", r.label, passed, len(checks), time.Since(start).Round(time.Millisecond))
	return checks, nil
}

// vmArgs are the flags of f a run in svclab's VM takes on.
func (f verifyFlags) vmArgs() []string {
	var extra []string
	if f.flows != "" {
		extra = []string{"--flows", f.flows}
	}
	if f.traced {
		extra = append(extra, "--trace")
	}
	if f.checkTimeout > 0 {
		extra = append(extra, "--check-timeout", f.checkTimeout.String())
	}
	if f.heartbeat > 0 {
		extra = append(extra, "--heartbeat", f.heartbeat.String())
	}
	return extra
}

// vanishedOr is err, or, when ctx ended first, why it did (its lab taken
// down, an interrupt): the steps cut short saw only "context canceled" or a
// killed iptables.
func vanishedOr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// printReport writes rep to w as a table, or as JSON.
func printReport(w io.Writer, rep verifyReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printChecks(w, rep.Checks, rep.Planned)
	for _, c := range rep.Checks {
		if c.Trace == nil {
			continue
		}
		res := "PASS"
		if !c.Passed {
			res = "FAIL"
		}
		fmt.Fprintf(w, "\n--- trace of %s %s (%s): expected %s, observed %s\n", res, c.Name, c.Mode, c.Expected, c.Observed)
		c.Trace.WriteText(w)
	}
	return nil
}

// verifyRuns expands --mode: "all" is every mode the proxy runs (svclab's: every
// mode it has a proxier for; kube-proxy's: all), each in every variant; each run
// gets its plan for topology t, read from the flows file when one is given.
func verifyRuns(f labFlags, t *topology.Topology, flows string) ([]run, error) {
	kubeProxy := f.proxyImpl == proxyKubeProxy
	modes := []string{f.mode}
	if f.mode == "all" {
		modes = nil
		for _, name := range proxy.Modes() {
			m, _ := proxy.Lookup(name)
			if err := m.HasProxier(); err != nil && !kubeProxy {
				fmt.Fprintf(os.Stderr, "svclab: %v: left out of --mode all\n", err)
				continue
			}
			modes = append(modes, name)
		}
	}
	var runs []run
	for _, name := range modes {
		g := f
		g.mode = name
		o, err := g.options()
		if err != nil {
			return nil, usage(err)
		}
		m, _ := proxy.Lookup(name)
		if err := m.HasProxier(); err != nil && !kubeProxy {
			return nil, usage(err)
		}
		variants := []proxy.Variant{m.VariantOf(o.Proxy)}
		if f.mode == "all" && f.backend == "" && len(m.Variants) > 0 {
			variants = m.Variants
		}
		for _, v := range variants {
			o := o
			if v.Backend != "" {
				o.Proxy.Backend = v.Backend
			}
			// A plan refuses what a run would.
			if err := lab.Check(t, o); err != nil {
				return nil, usage(err)
			}
			p, err := planFor(t, o, flows)
			if err != nil {
				return nil, err
			}
			label := proxy.Run{Mode: m, Variant: v, KubeProxy: kubeProxy}.Label()
			runs = append(runs, run{label: label, opts: o, plan: p})
		}
	}
	return runs, nil
}

// planFor is what a run of topology t with options o checks: the flows file's
// flows, or every flow of the topology.
func planFor(t *topology.Topology, o lab.Options, flows string) (verify.Plan, error) {
	// The lab the run would build (with a control plane, and so with its
	// cluster DNS, whose checks the plan holds), refused as the run refuses it.
	t, _, c, err := lab.Prepare(t, o)
	if err != nil {
		return verify.Plan{}, usage(err)
	}
	m, err := verify.ModelOf(o.Mode)
	if err != nil {
		return verify.Plan{}, usage(err)
	}
	if flows != "" {
		p, err := loadFlows(flows, t, m)
		return p, usage(err)
	}
	return verify.Derive(t, m, c), nil
}

// loadFlows reads --flows as -f is read: a file on disk, else a shipped flows file
// by name.
func loadFlows(name string, t *topology.Topology, m proxy.Model) (verify.Plan, error) {
	if _, err := os.Stat(name); err == nil {
		return verify.LoadFlows(name, t, m)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return verify.Plan{}, err
	}
	for _, file := range []string{name, name + ".yaml"} {
		if data, err := fs.ReadFile(topologies.Flows, path.Join("flows", file)); err == nil {
			return verify.ParseFlows(path.Join("<embedded>", "flows", file), data, t, m)
		}
	}
	shipped, _ := fs.Glob(topologies.Flows, "flows/*.yaml")
	for i, f := range shipped {
		shipped[i] = strings.TrimSuffix(path.Base(f), ".yaml")
	}
	return verify.Plan{}, fmt.Errorf("%s: no such file, and no shipped flows file has that name (shipped: %s)", name, strings.Join(shipped, ", "))
}

// vmMemoryForComponents is the guest memory of a run with the Kubernetes
// components: the API server, the controller manager and a kube-proxy per node
// take about 600 MiB resident, and the guest holds the component binary twice
// (in its initramfs and unpacked).
const vmMemoryForComponents = 4096

// verifyInVM runs the given runs' modes in svclab's VM, with extra arguments to
// verify, and returns their checks.
func verifyInVM(f labFlags, runs []run, extra []string) ([]verify.Check, error) {
	var checks []verify.Check
	for _, r := range runs {
		g := f
		g.mode, g.backend = r.opts.Mode, r.opts.Proxy.Backend
		vf := vmFlags{timeout: vm.DefaultTimeout, accel: vm.AccelAuto}
		if r.opts.ControlPlane || r.opts.KubeProxy != nil {
			// The components run in the guest from the host's binary (built
			// here if need be), and need the memory of a small cluster.
			bin, err := kube.Binary(context.Background(), kube.Options{Path: f.kubeBinary, Log: os.Stderr})
			if err != nil {
				return nil, err
			}
			g.kubeBinary, vf.memory = bin, vmMemoryForComponents
		}
		var out bytes.Buffer
		err := runInVM(vf, append(append(append([]string{"verify"}, g.args()...), extra...), "--json", "--no-vm"), &out)
		var code exitCode
		if err != nil && !(errors.As(err, &code) && int(code) == exitFailed) {
			return nil, fmt.Errorf("%s in the VM: %w", r.label, err)
		}
		var rep verifyReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			return nil, fmt.Errorf("%s in the VM: reading its report: %w", r.label, err)
		}
		checks = append(checks, rep.Checks...)
	}
	return checks, nil
}

// printChecks prints checks as a table; planned checks, which observed nothing,
// say PLAN.
func printChecks(w io.Writer, checks []verify.Check, planned bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tMODE\tFROM\tTO\tSERVICE\tEXPECTED\tOBSERVED")
	for _, c := range checks {
		res := "PASS"
		switch {
		case planned:
			res = "PLAN"
		case !c.Passed:
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", res, c.Mode, c.From, c.To, c.Service, c.Expected, c.Observed)
	}
	tw.Flush()
}
