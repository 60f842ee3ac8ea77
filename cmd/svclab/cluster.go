package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// The commands for a lab with a control plane: kubectl against its API server,
// and the logs of its components.

func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl LAB -- ARGS...",
		Short: "Run kubectl against a lab's API server (from inside the lab's network)",
		Long: `Run kubectl, from the lab's component binary, in the control plane's network
namespace with the lab's admin kubeconfig: the API server listens inside the lab
only, so this is the way in from the host. Changes made here reach the lab: svclab
follows the API server, and so does kube-proxy.`,
		Example: `  svclab kubectl httpd -- get svc
  svclab kubectl httpd -- apply -f service.yml
  svclab kubectl httpd -- get endpointslices -o wide`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return usage(errors.New("usage: svclab kubectl LAB -- ARGS..."))
			}
			if err := privileged(args[0]); err != nil {
				return err
			}
			r, err := record.Find(record.DefaultDir, args[0])
			if err != nil {
				return usage(err)
			}
			cp, ok := r.Member(topology.ControlPlaneMember)
			if !ok || r.Kubeconfig == "" {
				return usage(fmt.Errorf("lab %s has no control plane (start it with --control-plane or controlPlane: true)", r.ID))
			}
			// Files given to kubectl (-f service.yml) are read by kubectl itself,
			// in this working directory: the namespace switch changes the network
			// only.
			argv := append([]string{r.KubeBinary}, kube.KubectlArgs(r.Kubeconfig, filepath.Join(filepath.Dir(r.Kubeconfig), "kubectl-cache"), args[1:]...)...)
			return execIn(cp.NetNS, argv, os.Environ())
		},
	}
}

func newLogsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "logs LAB [COMPONENT|NODE]",
		Short: "Print the logs of a lab's components (kube-apiserver, kube-controller-manager, kube-proxy of a node)",
		Example: `  svclab logs web node-1          # kube-proxy on node-1
  svclab logs web kube-apiserver
  svclab logs web                 # lists the logs`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				if err := checkName("COMPONENT|NODE", args[1]); err != nil {
					return usage(err)
				}
			}
			// Without root, the user's own labs, in their user namespace.
			if err := privileged(""); err != nil {
				return err
			}
			r, err := record.Find(record.DefaultDir, args[0])
			if err != nil {
				return usage(err)
			}
			dir := filepath.Join(record.DefaultDir, r.ID)
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			if r.Kubeconfig == "" || len(logs) == 0 {
				return usage(fmt.Errorf("lab %s runs no components (no control plane)", r.ID))
			}
			names := make([]string, len(logs))
			for i, l := range logs {
				names[i] = strings.TrimSuffix(filepath.Base(l), ".log")
			}
			sort.Strings(names)
			if len(args) == 1 {
				fmt.Fprintln(cmd.OutOrStdout(), strings.Join(names, "\n"))
				return nil
			}
			want := args[1]
			if m, ok := r.Member(want); ok && m.Kind == member.KindNode {
				want = "kube-proxy-" + want
			}
			// Only a log listed above is opened: the argument picks one,
			// it never builds a path.
			if !slices.Contains(names, want) {
				return usage(fmt.Errorf("lab %s has no log %q (logs: %s)", r.ID, args[1], strings.Join(names, ", ")))
			}
			f, err := os.Open(filepath.Join(dir, want+".log"))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(cmd.OutOrStdout(), f)
			return err
		},
	}
}

func newKubeBinaryCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "kube-binary",
		Short: "Print the path of the Kubernetes components' binary, building it from components/ on first use",
		Long: `svclab runs kube-apiserver, kube-controller-manager, kube-proxy, kubectl and CoreDNS
from one binary, svclab-kube, built from this repository's components/ module (the
upstream code at one pinned release) on first use and cached under
/var/cache/svclab/kube as root, an ordinary user's ~/.cache/svclab/kube otherwise
(taking root's when it is there), keyed by the release and the sources. This builds it now
(several minutes and about 3 GB of memory the first time; progress on stderr) and
prints its path.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := kube.Binary(cmd.Context(), kube.Options{Path: path, Log: os.Stderr})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), bin)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "kube-binary", "", "check this binary instead")
	return cmd
}
