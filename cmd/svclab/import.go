package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svclab/svclab/internal/atomicfile"
	"github.com/svclab/svclab/lab/importer"
	"github.com/svclab/svclab/lab/topology"
)

func newImportCommand() *cobra.Command {
	var (
		out        string
		o          importer.Options
		selector   string
		namespaces []string
		clients    []string
		routes     []string
	)
	cmd := &cobra.Command{
		Use:   "import FILE|DIR... [-o OUT]",
		Short: "Write a topology file from a real cluster's Nodes, Services and EndpointSlices",
		Long: `Read what ` + "`kubectl get nodes,services,endpointslices -A -o yaml`" + ` (or -o json) prints,
from files or directories of them at any depth (also Endpoints instead of slices, as
` + "`get svc,ep`" + ` prints them, and ` + "`kubectl cluster-info dump --output-directory`" + `'s tree), and
optionally kube-proxy's ConfigMap (` + "`kubectl -n kube-system get cm kube-proxy -o yaml`" + `),
and write a topology file svclab runs as is: the nodes with their InternalIPs and
podCIDRs, every Service as the cluster holds it (selectorless), its EndpointSlices with
their endpoints' conditions as they were, a pod at each endpoint's address on its node,
and an outside client. A manifest no cluster ran (Deployments and Services, no status)
is completed as the API server and controllers would. What the file cannot hold is
listed in its header and on stderr, with what was done instead. -o writes a new file or
one an earlier import wrote, never one of yours.`,
		Example: `  kubectl get nodes,services,endpointslices -A -o yaml > cluster.yaml
  kubectl -n kube-system get cm kube-proxy -o yaml > kube-proxy.yaml
  svclab import cluster.yaml kube-proxy.yaml -o lab.yaml --namespace default --nodes 3`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if selector != "" {
				sel, err := labels.Parse(selector)
				if err != nil {
					return usage(fmt.Errorf("-l %q: %w", selector, err))
				}
				o.Selector = sel
			}
			if o.Nodes < 0 {
				return usage(fmt.Errorf("--nodes %d: want a count of nodes to keep", o.Nodes))
			}
			o.Namespaces = namespaces
			for _, c := range clients {
				name, ip, ok := strings.Cut(c, "=")
				if !ok {
					return usage(fmt.Errorf("--client %q: want NAME=IP", c))
				}
				o.Clients = append(o.Clients, topology.ClientSpec{Name: name, IP: ip})
			}
			for _, r := range routes {
				ip, nodes, ok := strings.Cut(r, "=")
				if !ok || nodes == "" {
					return usage(fmt.Errorf("--route %q: want IP=NODE[,NODE...]", r))
				}
				o.ExternalIPRoutes = append(o.ExternalIPRoutes, topology.ExternalIPRouteSpec{IP: ip, Nodes: strings.Split(nodes, ",")})
			}
			data, res, err := importer.Import(args, o)
			var ie *importer.InputError
			if errors.As(err, &ie) {
				return usage(err)
			}
			if err != nil {
				return err
			}
			for _, c := range res.Cut {
				fmt.Fprintln(cmd.ErrOrStderr(), "svclab import: cut:", c)
			}
			for _, n := range res.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "svclab import:", n)
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := writeImported(out, args, data); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "svclab import: wrote %s: %d nodes, %d Services, %d EndpointSlices, %d pods\n",
				out, len(res.File.Nodes), len(res.File.Services), len(res.File.EndpointSlices), len(res.File.Pods))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&out, "output", "o", "", "write the topology here (default: stdout)")
	fl.StringSliceVarP(&namespaces, "namespace", "n", nil, "keep only the Services of these namespaces")
	fl.StringVarP(&selector, "selector", "l", "", "keep only the Services whose labels match this selector")
	fl.IntVar(&o.Nodes, "nodes", 0, "keep at most this many nodes: those with the most endpoints of the kept Services, ties by name")
	fl.StringVar(&o.Name, "name", "", "the lab's name (default: imported)")
	fl.StringArrayVar(&clients, "client", nil, "NAME=IP: a machine outside the cluster, on the node network (repeatable; default: outside at the highest free address)")
	fl.StringArrayVar(&routes, "route", nil, "IP=NODE[,NODE...]: the nodes outside traffic to an external IP reaches (repeatable; default: the first node)")
	return cmd
}

// writeImported writes the topology to out, whole or not at all, and only
// where no file of the user's stands: out may be new or a file an earlier
// import wrote, never one of this import's inputs.
func writeImported(out string, inputs []string, data []byte) error {
	fi, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return usage(fmt.Errorf("-o %s: %w", out, err))
	case fi.IsDir():
		return usage(fmt.Errorf("-o %s: a directory; name the file to write", out))
	default:
		for _, in := range inputs {
			if ifi, err := os.Stat(in); err == nil && os.SameFile(fi, ifi) {
				return usage(fmt.Errorf("-o %s: is also an input (%s); write the topology elsewhere", out, in))
			}
		}
		head, err := readHead(out, 512)
		if err != nil {
			return usage(fmt.Errorf("-o %s: %w", out, err))
		}
		if !importer.Wrote(head) {
			return usage(fmt.Errorf("-o %s: the file exists and svclab import did not write it (it does not start with \"# Imported by `svclab import`\"); svclab never overwrites a file it did not create: name a new file, or remove this one yourself", out))
		}
	}
	if err := atomicfile.Write(out, data, 0o644); err != nil {
		return fmt.Errorf("-o %s: %w (nothing was written)", out, err)
	}
	return nil
}

// readHead is the first n bytes of file (fewer if it is shorter).
func readHead(file string, n int) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:k], nil
}
