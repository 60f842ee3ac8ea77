package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/internal/rootless"
	"github.com/svclab/svclab/lab/doctor"
)

func newDoctorCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Say what svclab can run on this host and where: natively, in its VM, or not, and what is missing",
		Long: `Report the host kernel; each kernel feature the proxy modes need, tried for real in a
throwaway network namespace (as root; removed again); each program with its version or
the package to install; whether svclab's VM can run, under KVM or TCG, and whether its
kernel is cached; and for every proxy mode "native", "in the VM" or "cannot run" with
what is missing and how to get it. Without root it tries them in a user namespace of
svclab's own, as every command without root runs: the verdicts are then what svclab
runs without root. Where the host refuses a user namespace, it cannot try the kernel,
says so, and calls no mode native.

Exit status: 0 when every mode can run somewhere, 1 when some cannot, 2 when it
cannot tell (not root, and no user namespace).`,
		Example: `  sudo svclab doctor
  sudo svclab doctor --json | jq '.modes[] | select(.where != "native")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rootless.Needed() {
				// In a user namespace of its own, as the other commands run
				// without root; where the host refuses one, what can be told
				// without probing.
				if err := privileged(""); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "svclab doctor: %v\n", err)
				}
			}
			// Ctrl-C must not cut the probe short of removing its namespace: it ends
			// the probe through the context instead.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := doctor.Run(ctx, doctor.Options{})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = doctor.WriteText(os.Stdout, rep)
			}
			if err != nil {
				return err
			}
			if !rep.Probed {
				return exitCode(exitUsage)
			}
			if !rep.OK {
				return exitCode(exitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
