package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/record"
)

// labState is a recorded lab as ls --json and inspect --json print it: its record
// and whether its owner still holds it.
type labState struct {
	record.Lab
	Running bool `json:"running"`
}

func stateOf(r *record.Lab) labState { return labState{Lab: *r, Running: r.Owner.Alive()} }

func newInspectCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect LAB [--json]",
		Short: "Show a running lab again: its members and addresses, Services, components",
		Long: `Print what 'svclab up' printed of a lab, at any time: its members (namespaces) with
their addresses, the Services' ports its proxies programmed when it came up (for
their state now: svclab kubectl LAB -- get svc,endpointslices, or svclab rules --lab
LAB), the component processes it runs, and how to reach its API server. LAB is the
lab's ID, or its name if only one lab has it. Needs no root.`,
		Example: `  svclab inspect web
  svclab inspect web --json | jq '.members[] | select(.kind == "pod") | .ip'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Without root, the user's own labs, in their user namespace.
			if err := privileged(""); err != nil {
				return err
			}
			r, err := record.Find(record.DefaultDir, args[0])
			if err != nil {
				return usage(err)
			}
			// Its owner says how the lab is now: the record on disk may be
			// behind it (the run directory full).
			r = record.Fresh(record.DefaultDir, r)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(stateOf(r))
			}
			printInspect(cmd.OutOrStdout(), stateOf(r))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the lab's record as JSON")
	return cmd
}

// printInspect prints a lab as `svclab up` did, and its components.
func printInspect(w io.Writer, s labState) {
	owner := fmt.Sprintf("held by process %d, %s", s.Owner.PID, s.State())
	if !s.Running {
		owner = "its process is gone (svclab clean removes what is left)"
	}
	proxy := "svclab's proxiers"
	if s.KubeProxy {
		proxy = "the real kube-proxy"
	}
	mode := s.Mode
	if mode == "" {
		mode = "none"
	}
	fmt.Fprintf(w, "Lab %s (%s, from %s): mode %s by %s, up %s, %s.\n\n", s.ID, s.Name, s.Source, mode, proxy,
		time.Since(s.Created).Round(time.Second), owner)
	printMembersAndServices(w, s.Lab)
	if len(s.Components) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "COMPONENT\tPID\tPROCESS")
		for _, c := range s.Components {
			state := "running"
			if !c.Process.Alive() {
				state = "gone"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", c.Name, c.Process.PID, state)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if s.Kubeconfig != "" {
		fmt.Fprintf(w, "API server:    kubeconfig %s (its server is inside the lab)\n", s.Kubeconfig)
		fmt.Fprintf(w, "Use kubectl:   svclab kubectl %s -- get svc\n", s.ID)
	}
	fmt.Fprintf(w, "Get inside:    svclab exec %s MEMBER -- COMMAND\n", s.ID)
	fmt.Fprintf(w, "Tear down:     svclab down %s\n", s.ID)
}
