package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/compare"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/version"
)

func newCompareCommand() *cobra.Command {
	var (
		f      labFlags
		node   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "compare -f TOPOLOGY --node NODE DUMP...",
		Short: "Say where a real node's kube-proxy rules differ from what kube-proxy would write for a topology",
		Long: `Compare DUMP, what a real node holds (iptables mode: iptables-save, with or without -c;
ipvs mode: ` + "`ipvsadm -Ln` or `-Sn`, `ipset save`" + ` and iptables-save; nftables mode: nft list
ruleset; in one file or several, "-" reads stdin), with the rules kube-proxy (the release
--kube-proxy-version names, else the topology's) would write on NODE for the topology's
state, as ` + "`svclab rules`" + ` renders them. In nftables mode, and with --proxy kube-proxy,
they are what the real kube-proxy writes in a throwaway lab of the topology (root and
the component binary, or --kube-proxy-binary). Both sides are normalized (counters,
handles, chain and element order, the order of Services in dispatch chains; the tool's
way of printing a rule); only kube-proxy's chains and tables count. Differences are
grouped by the Service port or endpoint they are about; --json prints them as JSON.
Exit 0 when equal, 1 when they differ, 2 on bad input.`,
		Example: `  svclab import cluster.yaml -o lab.yaml
  svclab compare -f lab.yaml --node node1 node1.iptables-save
  sudo svclab compare -f lab.yaml --node node1 --mode nftables node1.nft`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return usage(fmt.Errorf("--node: required, the node the dump comes from"))
			}
			if f.mode == "nftables" {
				// svclab has no nftables proxier of its own: what kube-proxy
				// would write is what the real one writes.
				f.proxyImpl = proxyKubeProxy
			}
			t, o, err := f.load()
			if err != nil {
				return err
			}
			if o.Mode != "iptables" && o.Mode != "ipvs" && o.Mode != "nftables" {
				return usage(fmt.Errorf("--mode %s: svclab compare reads iptables, ipvs and nftables dumps", o.Mode))
			}
			if _, ok := t.Node(node); !ok {
				// The cluster's name of a node import renamed (a dotted
				// EKS name, say) finds it as import named it.
				base := topology.MemberBase(node)
				if _, ok := t.Node(base); !ok {
					return usage(fmt.Errorf("%s: no node %q", t.Source, node))
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "svclab compare: node %s is %s in %s\n", node, base, t.Source)
				node = base
			}
			var dump strings.Builder
			for _, a := range args {
				data, err := readDump(a)
				if err != nil {
					return usage(err)
				}
				dump.Write(data)
				dump.WriteString("\n")
			}
			// The dump is read before any lab is built: bad input costs nothing.
			if err := compare.Check(o.Mode, dump.String()); err != nil {
				return usage(fmt.Errorf("%s: %w", strings.Join(args, ", "), err))
			}
			var want string
			if o.KubeProxy != nil {
				want, err = kubeProxyRules(cmd.ErrOrStderr(), t, o, node)
			} else {
				want, err = renderNode(t, o, node)
			}
			if err != nil {
				return err
			}
			var r *compare.Report
			switch o.Mode {
			case "iptables":
				r, err = compare.IPTables(want, dump.String())
			case "ipvs":
				r, err = compare.IPVS(want, dump.String(), frontends(t))
			case "nftables":
				r, err = compare.NFTables(want, dump.String())
			}
			if err != nil {
				return usage(fmt.Errorf("%s: %w", strings.Join(args, ", "), err))
			}
			out := cmd.OutOrStdout()
			config, _ := lab.ConfigOf(t, o)
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(compareJSON(node, o.Mode, config.Version.String(), t.Source, r)); err != nil {
					return err
				}
				if r.Equal() {
					return nil
				}
				return exitCode(exitFailed)
			}
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON (same exit codes)")
	return cmd
}

// frontends names t's Service addresses as IPVS shows them.
func frontends(t *topology.Topology) compare.Frontends {
	out := compare.Frontends{}
	for _, sp := range proxy.FromObjects(t.Services, t.EndpointSlices()) {
		name := sp.Name.String(version.Default)
		at := func(addr netip.Addr, port int) {
			out[fmt.Sprintf("%s %s:%d", sp.Protocol, addr, port)] = name
		}
		at(sp.ClusterIP, sp.Port)
		for _, a := range append(slices.Clone(sp.ExternalIPs), sp.LoadBalancerIPs...) {
			at(a, sp.Port)
		}
		if sp.NodePort != 0 {
			out[fmt.Sprintf("%s *:%d", sp.Protocol, sp.NodePort)] = name
		}
	}
	return out
}

func readDump(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// compareReport is `svclab compare --json`'s output.
type compareReport struct {
	Node             string           `json:"node"`
	Mode             string           `json:"mode"`
	KubeProxyVersion string           `json:"kubeProxyVersion"`
	Topology         string           `json:"topology"`
	Equal            bool             `json:"equal"`
	Differences      []compareSubject `json:"differences"`
}

type compareSubject struct {
	Name    string   `json:"name"`
	Verdict string   `json:"verdict"`
	Missing []string `json:"missing"`
	Extra   []string `json:"extra"`
	// Same counts the subject's rules the node holds as kube-proxy would
	// write them.
	Same int `json:"same"`
}

func compareJSON(node, mode, version, source string, r *compare.Report) compareReport {
	out := compareReport{Node: node, Mode: mode, KubeProxyVersion: version, Topology: source, Equal: r.Equal(), Differences: []compareSubject{}}
	lines := func(ls []compare.Line) []string {
		s := []string{}
		for _, l := range ls {
			s = append(s, l.String())
		}
		return s
	}
	for _, s := range r.Subjects {
		out.Differences = append(out.Differences, compareSubject{Name: s.Name, Verdict: s.Verdict(), Missing: lines(s.Missing), Extra: lines(s.Extra), Same: s.Same})
	}
	return out
}

// kubeProxyRules builds a throwaway lab of t with the real kube-proxy in every
// node (o.KubeProxy: the component binary's, or --kube-proxy-binary), and
// returns what node holds once kube-proxy programmed the state (lab.Up waits
// for that), as the mode's tools print it. Ctrl-C tears the lab down.
func kubeProxyRules(progress io.Writer, t *topology.Topology, o lab.Options, node string) (string, error) {
	if err := lab.Check(t, o); err != nil {
		return "", usage(err)
	}
	if err := privileged(""); err != nil {
		return "", err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(progress, "svclab compare: building a lab of %s with the real kube-proxy (%s mode) to read what it writes on %s\n", t.Source, o.Mode, node)
	l, err := lab.Up(ctx, t, o)
	if err != nil {
		return "", err
	}
	rules, err := nodeRules(l, node, o)
	return rules, errors.Join(err, l.Down())
}

// nodeRules is what node of l holds, as the mode's tools print it.
func nodeRules(l *lab.Lab, node string, o lab.Options) (string, error) {
	m, err := l.Member(node)
	if err != nil {
		return "", err
	}
	save := xtables.SaveProgram(o.Proxy.Backend)
	argvs := map[string][][]string{
		"iptables": {{save}},
		"ipvs":     {{"ipvsadm", "-Ln"}, {"ipset", "save"}, {save}},
		"nftables": {{"nft", "list", "ruleset"}},
	}[o.Mode]
	var b strings.Builder
	for _, argv := range argvs {
		out, err := namespaces.Output(m.NetNS, argv...)
		if err != nil {
			return "", fmt.Errorf("node %s: %s: %w", node, strings.Join(argv, " "), err)
		}
		b.Write(out)
		b.WriteString("\n")
	}
	return b.String(), nil
}
