package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/verify"
	"github.com/svclab/svclab/vm"
)

// errChecksFailed makes verify exit 1 after it printed its table.
var errChecksFailed = errors.New("some checks failed")

// verifyReport is what --json prints.
type verifyReport struct {
	Passed bool           `json:"passed"`
	Checks []verify.Check `json:"checks"`
}

// run is one mode and backend to verify.
type run struct {
	label string
	opts  lab.Options
}

func newVerifyCommand() *cobra.Command {
	var (
		f      labFlags
		asJSON bool
		noVM   bool
	)
	cmd := &cobra.Command{
		Use:   "verify [-f FILE] [--mode MODE|all] [--json]",
		Short: "Build the lab, check every flow to every Service with real connections, tear down",
		Long: `For every pod, node and client, and every ClusterIP:port and node:nodePort, derive from
the topology what must happen (which backends may answer and the source address they
must see, or refused, or dropped), check it with real connections, print a table and
tear the lab down. Exit status 0 only if every check passed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := loadTopology(f.file)
			if err != nil {
				return err
			}
			runs, err := verifyRuns(f)
			if err != nil {
				return usage(err)
			}
			if err := lab.CheckPrivileges(); err != nil {
				return err
			}
			here, inVM, err := splitRuns(runs, noVM)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var rep verifyReport
			var log io.Writer = os.Stderr
			for _, r := range here {
				start := time.Now()
				l, err := lab.Up(ctx, t, r.opts)
				if err != nil {
					return fmt.Errorf("%s: %w", r.label, err)
				}
				checks, err := verify.Run(ctx, l, r.label)
				err = errors.Join(err, l.Down())
				if err != nil {
					return fmt.Errorf("%s: %w", r.label, err)
				}
				passed := 0
				for _, c := range checks {
					if c.Passed {
						passed++
					}
				}
				fmt.Fprintf(log, "%s: %d of %d checks passed in %s\n", r.label, passed, len(checks), time.Since(start).Round(time.Millisecond))
				rep.Checks = append(rep.Checks, checks...)
			}
			if len(inVM) > 0 {
				checks, err := verifyInVM(f, inVM)
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
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				enc.Encode(rep)
			} else {
				printChecks(os.Stdout, rep.Checks)
			}
			if !rep.Passed {
				return errChecksFailed
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&noVM, "no-vm", false, "never run in svclab's VM, even when this kernel lacks what a mode needs")
	return cmd
}

// verifyRuns expands --mode: "all" is every mode svclab has a proxier for,
// each in every variant.
func verifyRuns(f labFlags) ([]run, error) {
	modes := []string{f.mode}
	if f.mode == "all" {
		modes = nil
		for _, name := range proxy.Modes() {
			m, _ := proxy.Lookup(name)
			if err := m.HasProxier(); err != nil {
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
			return nil, err
		}
		m, _ := proxy.Lookup(name)
		if err := m.HasProxier(); err != nil {
			return nil, err
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
			runs = append(runs, run{label: m.Label(v), opts: o})
		}
	}
	return runs, nil
}

// verifyInVM runs the given runs' modes in svclab's VM and returns their checks.
func verifyInVM(f labFlags, runs []run) ([]verify.Check, error) {
	var checks []verify.Check
	for _, r := range runs {
		g := f
		g.mode, g.backend = r.opts.Mode, r.opts.Proxy.Backend
		var out bytes.Buffer
		err := runInVM(vmFlags{timeout: vm.DefaultTimeout, accel: vm.AccelAuto}, append(append([]string{"verify"}, g.args()...), "--json", "--no-vm"), &out)
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

func printChecks(w io.Writer, checks []verify.Check) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tMODE\tFROM\tTO\tSERVICE\tEXPECTED\tOBSERVED")
	for _, c := range checks {
		res := "PASS"
		if !c.Passed {
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", res, c.Mode, c.From, c.To, c.Service, c.Expected, c.Observed)
	}
	tw.Flush()
}
