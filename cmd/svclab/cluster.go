package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/kube"
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
			if err := lab.CheckPrivileges(); err != nil {
				return err
			}
			r, err := lab.Find(lab.DefaultRecordDir, args[0])
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
			r, err := lab.Find(lab.DefaultRecordDir, args[0])
			if err != nil {
				return usage(err)
			}
			dir := filepath.Join(lab.DefaultRecordDir, r.ID)
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
			if m, ok := r.Member(want); ok && m.Kind == lab.KindNode {
				want = "kube-proxy-" + want
			}
			f, err := os.Open(filepath.Join(dir, want+".log"))
			if err != nil {
				return usage(fmt.Errorf("lab %s has no log %q (logs: %s)", r.ID, args[1], strings.Join(names, ", ")))
			}
			defer f.Close()
			_, err = io.Copy(cmd.OutOrStdout(), f)
			return err
		},
	}
}
