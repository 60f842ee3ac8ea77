package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/graph"
	"github.com/svclab/svclab/lab/record"
)

func newGraphCommand() *cobra.Command {
	var (
		file   string
		format string
	)
	cmd := &cobra.Command{
		Use:   "graph [LAB | -f FILE] [--format dot|svg]",
		Short: "Draw a lab: members on the node network, pods under their nodes, Services to their endpoints",
		Long: `Print a picture of a running lab (LAB: its ID, or its name if only one lab has it) or
of the lab a topology file would build (-f FILE, or a shipped topology by name; the
built-in web.yaml without either): the node network with the nodes, clients, load
balancers and control plane on it, each pod under its node, and each Service port
with dashed edges to the pods that serve it, every member with its address.
--format dot (the default) is Graphviz's language; --format svg is an SVG picture
laid out by svclab itself, no Graphviz needed. Needs no root.`,
		Example: `  svclab graph -f web --format svg > web.svg
  svclab graph web | dot -Tpng > web.png     # a running lab, laid out by Graphviz`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			draw := map[string]func(w io.Writer, l graph.Lab) error{"dot": graph.DOT, "svg": graph.SVG}[format]
			if draw == nil {
				return usage(fmt.Errorf("--format %q: want dot or svg", format))
			}
			var g graph.Lab
			switch {
			case len(args) == 1 && file != "":
				return usage(errors.New("give a running LAB or -f FILE, not both"))
			case len(args) == 1:
				r, err := record.Find(record.DefaultDir, args[0])
				if err != nil {
					return usage(err)
				}
				g = graph.Lab{Lab: *r, Network: "node network"}
			default:
				t, err := loadTopology(file)
				if err != nil {
					return err
				}
				r, err := lab.Describe(t, lab.Options{})
				if err != nil {
					return usage(err)
				}
				g = graph.Lab{Lab: r, Network: "node network " + t.NodeCIDR.String()}
			}
			return draw(cmd.OutOrStdout(), g)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", fileHelp())
	cmd.Flags().StringVar(&format, "format", "dot", "dot (Graphviz's language) or svg (a picture, laid out by svclab)")
	return cmd
}
