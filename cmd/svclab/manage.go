package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/kubelet"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

func newDownCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "down LAB",
		Short: "Tear a lab down (LAB is its ID, or its name if only one lab has it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := privileged(args[0]); err != nil {
				return err
			}
			r, err := record.Find(record.DefaultDir, args[0])
			if err != nil {
				return usage(err)
			}
			// Before the owner removes the run directory with the records of
			// killed traces, whose monitors would hold the namespaces.
			k, traceErr := record.RemoveKilledTraces(record.DefaultDir, r.ID)
			if k.Removed() {
				fmt.Fprintln(cmd.ErrOrStderr(), k)
			}
			if err := stopOwner(r); err != nil {
				return errors.Join(traceErr, err)
			}
			if traceErr != nil {
				return traceErr
			}
			fmt.Printf("Lab %s is down.\n", r.ID)
			return nil
		},
	}
}

// stopOwner asks the lab's owner to tear it down and waits; a lab whose owner is
// gone is cleaned here.
func stopOwner(r *record.Lab) error {
	if r.Owner.Alive() {
		r.Owner.Signal(syscall.SIGTERM)
		deadline := time.Now().Add(30 * time.Second)
		for r.Owner.Alive() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if r.Owner.Alive() {
			return fmt.Errorf("lab %s: its process %d did not stop within 30 s; `svclab clean --all` forces it", r.ID, r.Owner.PID)
		}
	}
	// The owner removes its lab when it stops; if it died first, this does.
	_, err := record.Teardown(record.DefaultDir, r)
	return err
}

func newLsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--json]",
		Short: "List labs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Without root, the user's own labs, in their user namespace.
			if err := privileged(""); err != nil {
				return err
			}
			recs, bad, err := record.Scan(record.DefaultDir)
			if err != nil {
				return err
			}
			for _, c := range bad {
				fmt.Fprintf(cmd.ErrOrStderr(), "svclab: warning: %v\n", c)
			}
			// A running lab's owner says how the lab is now: its record on
			// disk may be behind it (the run directory full).
			for i, r := range recs {
				recs[i] = record.Fresh(record.DefaultDir, r)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				states := make([]labState, 0, len(recs))
				for _, r := range recs {
					states = append(states, stateOf(r))
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(states)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "LAB\tNAME\tMODE\tMEMBERS\tOWNER\tAGE\tSOURCE")
			for _, r := range recs {
				state := fmt.Sprintf("%d %s", r.Owner.PID, r.State())
				if !r.Owner.Alive() {
					state = "gone (svclab clean removes it)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Name, r.Mode, len(r.Members)-1, state,
					time.Since(r.Created).Round(time.Second), r.Source)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the labs' records as JSON, each with running: whether its process still holds it, and recordStale: since when and why the record on disk is behind a running lab")
	return cmd
}

func newCleanCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what killed labs left behind (every svclab namespace no running lab owns)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := privileged(""); err != nil {
				return err
			}
			rep, err := record.Clean(record.DefaultDir, all)
			for _, k := range rep.Traces {
				fmt.Fprintln(cmd.ErrOrStderr(), k)
			}
			for _, id := range rep.Labs {
				fmt.Printf("removed lab %s\n", id)
			}
			for _, p := range rep.Corrupt {
				fmt.Printf("removed corrupt record %s\n", p)
			}
			fmt.Printf("removed %d namespace(s)\n", len(rep.Namespaces))
			for _, id := range rep.Running {
				fmt.Printf("left lab %s running (svclab down %s, or clean --all)\n", id, id)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also stop running labs")
	return cmd
}

func newExecCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "exec LAB MEMBER -- COMMAND [ARGS...]",
		Short: "Run a command inside a lab member's network namespace",
		Example: `  svclab exec web node-1 -- iptables-save -t nat
  svclab exec web client -- curl -s 10.96.123.45
  svclab exec web node-1 -- conntrack -L`,
		Args: cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 2 {
				return usage(errors.New("usage: svclab exec LAB MEMBER -- COMMAND [ARGS...]"))
			}
			if err := checkName("MEMBER", args[1]); err != nil {
				return usage(err)
			}
			if err := privileged(args[0]); err != nil {
				return err
			}
			r, err := record.Find(record.DefaultDir, args[0])
			if err != nil {
				return usage(err)
			}
			m, ok := r.Member(args[1])
			if !ok {
				var names []string
				for _, m := range r.Members {
					names = append(names, m.Name)
				}
				return usage(fmt.Errorf("lab %s has no member %q (members: %s)", r.ID, args[1], strings.Join(names, ", ")))
			}
			// A pod's command gets what its kubelet would give it: the
			// service environment and its resolv.conf.
			env, binds, err := kubelet.ExecContext(record.DefaultDir, r, m.Name, os.Environ())
			if err != nil {
				return err
			}
			return execWatched(r, m.NetNS, args[2:], env, binds...)
		},
	}
}

// execIn replaces this process with argv running in the namespace, with env and
// the files binds puts in place.
func execIn(ns string, argv, env []string, binds ...namespaces.Bind) error {
	err := namespaces.Exec(ns, argv, env, binds...)
	if errors.Is(err, exec.ErrNotFound) {
		return usage(err)
	}
	return err
}

// checkName refuses a member or component name that is no name: a path, or
// one of its parts (".", ".."), which could reach files outside the lab.
func checkName(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("%s %q: a name, never a path", what, name)
	}
	return nil
}
