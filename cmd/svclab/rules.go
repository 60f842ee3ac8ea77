package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

func newRulesCommand() *cobra.Command {
	var (
		f       labFlags
		node    string
		running string
	)
	cmd := &cobra.Command{
		Use:   "rules [-f FILE] [--node NODE] [--mode MODE]",
		Short: "Print what a mode would install on a node, without root",
		Long: `Print the rules the proxy mode would install on NODE (every node when --node is not
given): iptables-restore input for iptables mode, ipvsadm -Ln style virtual servers plus
ipsets and iptables rules for ipvs mode. Nothing is created; no root is needed.`,
		Example: `  svclab rules -f topologies/httpd.yaml --node node1 --kube-proxy-version 1.18`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if running != "" {
				return installedRules(out, running, node)
			}
			t, o, err := f.load()
			if err != nil {
				return err
			}
			found := false
			for _, n := range t.Nodes {
				if node != "" && n.Name != node {
					continue
				}
				found = true
				text, err := renderNode(t, o, n.Name)
				if err != nil {
					return err
				}
				if node == "" {
					fmt.Fprintf(out, "# node %s (%s)\n", n.Name, n.IP)
				}
				io.WriteString(out, text)
			}
			if !found {
				return usage(fmt.Errorf("%s: no node %q", t.Source, node))
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&node, "node", "", "the node whose rules to print (default: every node)")
	cmd.Flags().StringVar(&running, "lab", "", "print what a running lab's nodes hold instead (whatever programs them: svclab's proxiers or the real kube-proxy); needs root")
	return cmd
}

// installedRules prints what the nodes of the running lab id hold, as the lab's
// mode lists it (iptables-save, nft list table, ipvsadm -Ln).
func installedRules(out io.Writer, id, node string) error {
	if err := privileged(id); err != nil {
		return err
	}
	r, err := record.Find(record.DefaultDir, id)
	if err != nil {
		return usage(err)
	}
	mode, err := proxy.Lookup(r.Mode)
	if err != nil {
		return usage(fmt.Errorf("lab %s: %w", r.ID, err))
	}
	found := false
	for _, m := range r.Members {
		if m.Kind != member.KindNode || (node != "" && m.Name != node) {
			continue
		}
		found = true
		for _, argv := range mode.Rules(proxy.Config{Backend: r.Backend}) {
			fmt.Fprintf(out, "# node %s: %s\n", m.Name, strings.Join(argv, " "))
			text, err := namespaces.Output(m.NetNS, argv...)
			out.Write(text)
			if err != nil {
				fmt.Fprintf(out, "# (%v)\n", err)
			}
		}
	}
	if !found {
		return usage(fmt.Errorf("lab %s has no node %q", r.ID, node))
	}
	return nil
}

// renderNode is what o's mode would install on node for t's state, as
// `svclab rules` prints it.
func renderNode(t *topology.Topology, o lab.Options, node string) (string, error) {
	mode, err := proxy.Lookup(o.Mode)
	if err != nil {
		return "", usage(err)
	}
	if err := mode.HasProxier(); err != nil {
		return "", usage(fmt.Errorf("%w, so svclab cannot print its rules", err))
	}
	if mode.Render == nil {
		return "", usage(fmt.Errorf("mode %s: svclab cannot render its rules without running it", mode.Name))
	}
	config, err := lab.ConfigOf(t, o)
	if err != nil {
		return "", usage(err)
	}
	n, ok := t.Node(node)
	if !ok {
		return "", usage(fmt.Errorf("%s: no node %q", t.Source, node))
	}
	state := proxy.NewState(t.Services, t.EndpointSlices(), nil)
	text, err := mode.Render(proxy.Target{Node: proxy.Node{Name: n.Name, IP: n.IP, PodCIDR: n.PodCIDR}, Config: config}, state)
	if err != nil {
		return "", usage(fmt.Errorf("node %s: %w", n.Name, err))
	}
	return text, nil
}
