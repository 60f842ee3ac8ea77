// Command svclab builds fake Kubernetes clusters out of network namespaces, installs
// kube-proxy's rules into them for real, and checks Service behaviour with real
// traffic. `svclab --help` lists the commands.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/internal/liblog"
	"github.com/svclab/svclab/internal/rootless"
	"github.com/svclab/svclab/lab/namespaces"
	_ "github.com/svclab/svclab/lab/proxy/iptables" // registers mode "iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"     // registers mode "ipvs"
	_ "github.com/svclab/svclab/lab/proxy/nftables" // registers mode "nftables"
	"github.com/svclab/svclab/lab/topology"
)

// Exit codes: 1 when checks ran and failed, 2 when the command could not run at all
// (bad input, missing privileges or kernel features).
const (
	exitFailed = 1
	exitUsage  = 2
)

// newRootCommand is svclab's command line.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "svclab",
		Short: "Prove how Kubernetes Services behave in the Linux kernel",
		Long: `svclab builds fake nodes, pods and outside clients as network namespaces joined by
veth pairs, installs kube-proxy's rules into the nodes for real, and drives real TCP
and UDP traffic through them. Topologies are YAML files (see topologies/); without -f
the built-in web.yaml is used.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `svclab version` prints.
		Version: svclabVersion(),
	}
	root.SetVersionTemplate("{{versionText}}")
	root.AddCommand(newUpCommand(), newDownCommand(), newLsCommand(), newExecCommand(), newCleanCommand(),
		newRulesCommand(), newVerifyCommand(), newKubectlCommand(), newLogsCommand(), newKubeBinaryCommand(), newVMCommand(), newBenchCommand(), newDoctorCommand(), newImportCommand(), newCompareCommand(), newTraceCommand(),
		newVersionCommand(), newInspectCommand(), newGraphCommand(), newUnshareCommand())
	completeNames(root)
	strictUsage(root)
	return root
}

// usageError marks errors that exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

func main() {
	liblog.Quiet(os.Stderr)
	// In the user namespace a run without root made: its mounts first.
	if err := rootless.Setup(); err != nil {
		fmt.Fprintln(os.Stderr, "svclab:", err)
		os.Exit(1)
	}
	os.Exit(runSvclab(os.Args[1:], os.Stderr))
}

// runSvclab runs svclab with args and returns its exit status, having told stderr what
// went wrong; a usage error also says where to read the usage.
func runSvclab(args []string, stderr io.Writer) int {
	invocation = args
	root := newRootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintln(stderr, "svclab:", err)
	var ue usageError
	var te topology.ErrorList
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "see '%s --help'\n", cmd.CommandPath())
		return exitUsage
	case errors.Is(err, namespaces.ErrPrivileges), errors.As(err, &te):
		return exitUsage
	}
	return exitFailed
}
