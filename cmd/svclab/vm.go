package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/vm"
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
	// memory is the guest's memory in MiB; 0: the runner's default.
	memory int
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
/var/cache/svclab as root, an ordinary user's ~/.cache/svclab otherwise (taking
root's kernel and image when they are there). Files named in ARGS are copied into the guest.`,
		Example: `  svclab vm -- verify --mode ipvs
  svclab vm -- rules --mode ipvs -f topologies/httpd.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInVM(f, args, os.Stdout)
		},
	}
	cmd.Flags().DurationVar(&f.timeout, "timeout", vm.DefaultTimeout, "hard limit for the whole VM, boot included")
	cmd.Flags().StringVar(&f.accel, "accel", vm.AccelAuto, "auto (KVM if it boots, else TCG), kvm or tcg")
	cmd.Flags().StringVar(&f.out, "out", "", "copy the guest's /out here when the command ends")
	cmd.Flags().IntVar(&f.memory, "memory", vm.DefaultMemoryMiB, "the guest's memory in MiB")
	return cmd
}

// runInVM runs this svclab binary with args in the VM, its standard output going to
// stdout. Arguments naming files on this machine are copied in and rewritten to
// their guest paths.
func runInVM(f vmFlags, args []string, stdout io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	guestArgs, files := toGuest(args)
	files["bin/svclab"] = self
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := vm.Run(ctx, vm.Config{
		Command: append([]string{"svclab"}, guestArgs...),
		Files:   files,
		OutDir:  f.out, Timeout: f.timeout, Accel: f.accel, MemoryMiB: f.memory,
		Stdout: stdout, Stderr: os.Stderr, Log: os.Stderr,
	})
	if err != nil {
		return fmt.Errorf("svclab's VM: %w", err)
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// namesNoFile are the flags whose values are names, never files: a value that
// happens to name a file in the working directory (a binary called svclab, a
// file called web) stays as it is.
var namesNoFile = map[string]bool{
	"--mode": true, "--proxy": true, "--backend": true, "--apply": true, "--scheduler": true,
	"--kube-proxy-version": true, "--kube-proxy-modes": true, "--modes": true, "--methods": true, "--backends": true,
}

// toGuest rewrites args for the guest: each one naming a regular file on this
// machine, but a name flag's value, becomes the guest path the file is copied
// to; files maps those guest paths (under /svclab) to the files here.
func toGuest(args []string) (guestArgs []string, files map[string]string) {
	files = map[string]string{}
	guestArgs = make([]string, len(args))
	for i, a := range args {
		guestArgs[i] = a
		if i > 0 && namesNoFile[args[i-1]] {
			continue
		}
		if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() {
			abs, _ := filepath.Abs(a)
			guest := fmt.Sprintf("input/%d/%s", i, filepath.Base(a))
			files[guest] = abs
			guestArgs[i] = "/svclab/" + guest
		}
	}
	return guestArgs, files
}

// splitRuns sorts runs into those this kernel can do and those that need the VM,
// saying so in one line for each of the latter. With noVM, or inside the VM, a
// run this kernel cannot do is an error.
func splitRuns(runs []run, noVM bool) (here, inVM []run, err error) {
	for _, r := range runs {
		mode, err := proxy.Lookup(r.opts.Mode)
		if err != nil {
			return nil, nil, usage(err)
		}
		if err := mode.Available(); err != nil {
			if noVM || os.Getenv("SVCLAB_VM") == "1" {
				return nil, nil, usage(fmt.Errorf("mode %s: %w", mode.Name, err))
			}
			fmt.Fprintf(os.Stderr, "svclab: %s cannot run on this kernel (%v); it runs in svclab's VM on Debian's kernel (--no-vm turns this off)\n", r.label, err)
			inVM = append(inVM, r)
			continue
		}
		here = append(here, r)
	}
	return here, inVM, nil
}
