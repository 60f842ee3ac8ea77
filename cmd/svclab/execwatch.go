package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

// execWatched runs argv in the namespace ns of lab r's member, with env and
// binds, as a child that svclab waits for, and exits as it exits. Were svclab to
// replace itself with the command (as it once did), a lab taken down under the
// command would show only as the command's own failure ("signal: killed",
// "Cannot open network namespace"), or as a command that runs on in a namespace
// no lab holds any more. Waiting instead, svclab sees the lab go, ends the
// command and says so, and who took it.
func execWatched(r *record.Lab, ns string, argv, env []string, binds ...namespaces.Bind) error {
	// Signals for the command are passed on, but for a terminal's Ctrl-C
	// and Ctrl-\, which reach it directly (it shares svclab's process
	// group): svclab only outlives those.
	_, ttyErr := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	fromTerminal := ttyErr == nil
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	cmd, err := namespaces.Start(ns, argv, env, binds...)
	if errors.Is(err, exec.ErrNotFound) {
		return usage(err)
	}
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := watchLab(ctx, cancel, record.DefaultDir, *r, "exec")
	defer stop()
	for {
		select {
		case sig := <-sigs:
			if !fromTerminal || sig == syscall.SIGTERM || sig == syscall.SIGHUP {
				cmd.Process.Signal(sig)
			}
		case err := <-exited:
			// A command that failed as its lab went: the lab's going is
			// the reason to give.
			if err != nil {
				if v := record.Gone(record.DefaultDir, r, "exec"); v != nil {
					return v
				}
			}
			return exitOf(err)
		case <-ctx.Done():
			v, _ := vanishedCause(ctx)
			// The command runs in a namespace no lab holds any more: it
			// is ended as a lab's own processes are, SIGTERM and then,
			// if it lingers, SIGKILL.
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
			return fmt.Errorf("%w; the command %q was ended", v, argv[0])
		}
	}
}

// exitOf is svclab's exit for a command that ended with err: its own exit
// status, or 128 plus the signal that ended it, as a shell reports it.
func exitOf(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return exitCode(128 + int(st.Signal()))
	}
	return exitCode(ee.ExitCode())
}
