// Command svclab-vm runs a command in svclab's VM (a qemu guest booting Debian's
// distribution kernel, with IPVS, ipset and both iptables backends) and exits
// with the command's status. It is the runner scripts/vm/run.sh and CI use until
// the svclab CLI's `svclab vm` covers the same ground.
//
//	svclab-vm [flags] -- COMMAND [ARG...]
//	svclab-vm -probe
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/svclab/svclab/vm"
)

// pairs is a repeatable KEY=VALUE flag.
type pairs map[string]string

func (p pairs) String() string { return "" }

func (p pairs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", s)
	}
	p[k] = v
	return nil
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	files, env := pairs{}, pairs{}
	var tools list
	var c vm.Config
	flag.Var(files, "f", "GUEST=HOST: copy host file or directory HOST to GUEST (relative: under /svclab); repeatable")
	flag.Var(env, "e", "NAME=VALUE: set an environment variable for the command; repeatable")
	flag.Var(&tools, "tool", "extra host executable for the guest, with its libraries; repeatable")
	flag.StringVar(&c.OutDir, "out", "", "copy the guest's /out here when the command ends")
	flag.DurationVar(&c.Timeout, "timeout", vm.DefaultTimeout, "hard limit for the VM, boot included")
	flag.StringVar(&c.Accel, "accel", vm.AccelAuto, "auto, kvm or tcg")
	flag.IntVar(&c.MemoryMiB, "mem", vm.DefaultMemoryMiB, "guest memory in MiB")
	flag.IntVar(&c.CPUs, "cpus", vm.DefaultCPUs, "guest CPUs")
	flag.StringVar(&c.CacheDir, "cache", vm.DefaultCacheDir, "cache for kernels, guest images and accelerator verdicts")
	console := flag.Bool("console", false, "copy the guest console (kernel messages) to stderr")
	quiet := flag.Bool("q", false, "no progress messages")
	probe := flag.Bool("probe", false, "boot, run /usr/bin/true and report kernel, accelerator and boot times")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] -- COMMAND [ARG...]\n       %s -probe\n", os.Args[0], os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	c.Files, c.Env, c.Tools = files, env, tools
	c.Command = flag.Args()
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	if !*quiet {
		c.Log = os.Stderr
	}
	if *console {
		c.Console = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *probe {
		r, err := vm.Probe(ctx, c)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		report(os.Stdout, r)
		return
	}
	if len(c.Command) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	code, err := vm.Run(ctx, c)
	if err != nil {
		// 125, like env(1) and docker run: the runner failed, whatever the
		// command did.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	os.Exit(code)
}

func report(w io.Writer, r vm.Result) {
	fmt.Fprintf(w, "kernel:  %s\naccel:   %s\nimage:   %s\nprepare: %s\nbooted:  %s\nstarted: %s\ntotal:   %s\n",
		r.Kernel, r.Accel, r.Image, round(r.Prepare), round(r.Booted), round(r.Started), round(r.Total))
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
