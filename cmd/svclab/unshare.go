package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/cobra"
)

func newUnshareCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unshare -- COMMAND [ARG...]",
		Short: "Run a command in the user namespace svclab makes without root, as root there (go test without sudo)",
		Long: `Without root, runs COMMAND in a user namespace of its own, made as svclab makes
one for each of its commands (README: Without root): the user is root inside, with
the user's subordinate IDs mapped from 1 up when /etc/subuid has a range and
newuidmap is installed; /run is the run's own, /run/svclab the user's state
directory, and the network namespace is new, lo up. What COMMAND builds goes
with the namespace when it ends. This is how the Ginkgo suite runs without sudo:

  svclab unshare -- go test ./specs

As root there is nothing to unshare: COMMAND runs as it is.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := privileged(""); err != nil {
				return err
			}
			path, err := exec.LookPath(args[0])
			if err != nil {
				return usage(fmt.Errorf("unshare: %w", err))
			}
			return syscall.Exec(path, args, os.Environ())
		},
	}
	// Every flag after COMMAND is COMMAND's.
	cmd.Flags().SetInterspersed(false)
	return cmd
}
