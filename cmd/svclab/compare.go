package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/compare"
)

func newCompareCommand() *cobra.Command {
	var (
		f    labFlags
		node string
	)
	cmd := &cobra.Command{
		Use:   "compare -f TOPOLOGY --node NODE DUMP",
		Short: "Say where a real node's kube-proxy rules differ from what kube-proxy would write for a topology",
		Long: `Compare DUMP, what a real node holds (iptables-save; "-" reads stdin), with the rules
kube-proxy (the release --kube-proxy-version names, else the topology's) would write on
NODE for the topology's state, as ` + "`svclab rules`" + ` renders them. Both sides are normalized
as the differential check normalizes them (counters, chain order, the order of Services in
dispatch chains; iptables-save's way of printing a rule); only kube-proxy's chains and
the jumps to them count. Differences are grouped by the Service port or endpoint they are
about. Exit 0 when equal, 1 when they differ, 2 on bad input.`,
		Example: `  svclab import cluster.yaml -o lab.yaml
  svclab compare -f lab.yaml --node node1 node1.iptables-save`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return usage(fmt.Errorf("--node: required, the node the dump comes from"))
			}
			t, err := loadTopology(f.file)
			if err != nil {
				return err
			}
			o, err := f.options()
			if err != nil {
				return usage(err)
			}
			if o.Mode != "iptables" {
				return usage(fmt.Errorf("--mode %s: svclab compare reads iptables-save dumps only (iptables mode)", o.Mode))
			}
			want, err := renderNode(t, o, node)
			if err != nil {
				return err
			}
			dump, err := readDump(args[0])
			if err != nil {
				return usage(err)
			}
			r, err := compare.IPTables(want, string(dump))
			if err != nil {
				return usage(fmt.Errorf("%s: %w", args[0], err))
			}
			out := cmd.OutOrStdout()
			config, _ := lab.ConfigOf(t, o)
			if r.Equal() {
				fmt.Fprintf(out, "node %s holds what kube-proxy %s would write in %s mode for %s\n", node, config.Version, o.Mode, t.Source)
				return nil
			}
			fmt.Fprintf(out, "node %s differs from what kube-proxy %s would write in %s mode for %s: %d differences\n%s",
				node, config.Version, o.Mode, t.Source, len(r.Subjects), r)
			return exitCode(exitFailed)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&node, "node", "", "the topology's node the dump comes from")
	return cmd
}

func readDump(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}
