package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/vm"
)

// exitCode carries a status to exit with, without a message of its own (the VM's
// command already printed its).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// vmFlags are how svclab runs its VM.
type vmFlags struct {
	timeout time.Duration
	accel   string
	out     string
}

func newVMCommand() *cobra.Command {
	var f vmFlags
	cmd := &cobra.Command{
		Use:   "vm [--timeout D] [--accel auto|kvm|tcg] [--out DIR] -- ARGS...",
		Short: "Run svclab ARGS inside a VM booting Debian's kernel, which has IPVS",
		Long: `Boot Debian's distribution kernel under qemu (KVM where it works, TCG otherwise) with a
minimal root holding this svclab, iptables (both backends), ipset, ipvsadm and
conntrack, run 'svclab ARGS' there as root, stream its output, and return its exit
status. The kernel is fetched with apt-get download once and cached under
/var/cache/svclab. Files named in ARGS are copied into the guest.`,
		Example: `  svclab vm -- verify --mode ipvs
  svclab vm -- rules --mode ipvs -f topologies/httpd.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInVM(f, args)
		},
	}
	cmd.Flags().DurationVar(&f.timeout, "timeout", vm.DefaultTimeout, "hard limit for the whole VM, boot included")
	cmd.Flags().StringVar(&f.accel, "accel", vm.AccelAuto, "auto (KVM if it boots, else TCG), kvm or tcg")
	cmd.Flags().StringVar(&f.out, "out", "", "copy the guest's /out here when the command ends")
	return cmd
}

// runInVM runs this svclab binary with args in the VM. Arguments naming files on
// this machine are copied in and rewritten to their guest paths.
func runInVM(f vmFlags, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	files := map[string]string{"bin/svclab": self}
	guestArgs := make([]string, len(args))
	for i, a := range args {
		guestArgs[i] = a
		if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() {
			abs, _ := filepath.Abs(a)
			guest := fmt.Sprintf("input/%d/%s", i, filepath.Base(a))
			files[guest] = abs
			guestArgs[i] = "/svclab/" + guest
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := vm.Run(ctx, vm.Config{
		Command: append([]string{"svclab"}, guestArgs...),
		Files:   files,
		OutDir:  f.out, Timeout: f.timeout, Accel: f.accel,
		Stdout: os.Stdout, Stderr: os.Stderr, Log: os.Stderr,
	})
	if err != nil {
		return fmt.Errorf("svclab's VM: %w", err)
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// maybeInVM runs the whole command in the VM when a mode it needs cannot run on this
// kernel, saying so in one line. It returns false when the command should run here.
func maybeInVM(cmd *cobra.Command, runs []run, noVM bool) (bool, error) {
	for _, r := range runs {
		mode, err := proxy.Lookup(r.opts.Mode)
		if err != nil {
			return true, usage(err)
		}
		err = mode.Available()
		if err == nil {
			continue
		}
		if noVM || os.Getenv("SVCLAB_VM") == "1" {
			return true, usage(fmt.Errorf("mode %s: %w", mode.Name, err))
		}
		fmt.Fprintf(os.Stderr, "svclab: mode %s cannot run on this kernel (%v); running in svclab's VM with Debian's kernel (--no-vm turns this off)\n", mode.Name, err)
		return true, runInVM(vmFlags{timeout: vm.DefaultTimeout, accel: vm.AccelAuto}, append(os.Args[1:], "--no-vm"))
	}
	return false, nil
}
