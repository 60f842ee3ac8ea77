package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

// ownerContext is the context of a command that owns the labs it builds (verify):
// it ends on SIGINT or SIGTERM, with the reason as its cause. `svclab down` and
// `svclab clean --all` stop a lab by sending its owner SIGTERM, so a SIGTERM is
// reported as the lab being taken down, naming the svclab process doing it when
// one runs, instead of as the "context canceled" of whatever step it cut short.
// The reason is also written to log at once: `clean --all` follows its SIGTERM
// with SIGKILL after five seconds, which would leave nothing said.
func ownerContext(during, dir string, log io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for sig := range sigs {
			if ctx.Err() != nil {
				continue
			}
			var cause error = fmt.Errorf("%s interrupted (%v): %w", during, sig, context.Canceled)
			if sig == syscall.SIGTERM {
				cause = fmt.Errorf("svclab %s got SIGTERM: %w", during, context.Canceled)
				if r := ownLab(dir); r != nil {
					cause = &record.Vanished{ID: r.ID, During: during, Why: "svclab " + during + ", its owner, got SIGTERM", By: record.Stopper(dir, r)}
				}
			}
			fmt.Fprintf(log, "svclab: %v; tearing down\n", cause)
			cancel(cause)
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(sigs)
		cancel(nil)
	}
}

// ownLab is the recorded lab this process owns, nil when there is none (yet).
func ownLab(dir string) *record.Lab {
	recs, _ := record.List(dir)
	for _, r := range recs {
		if r.Owner.PID == os.Getpid() && r.Owner.Alive() {
			return r
		}
	}
	return nil
}

// watchLab cancels ctx's run (through cancel) with a *record.Vanished when
// the lab r, recorded in dir, stops being whole under it: its record removed,
// one of its namespaces deleted (by its owner's teardown under `svclab down`,
// by `ip netns delete`, by a `svclab clean` that took the lab for a leftover).
// It looks whenever an entry of dir or of the namespaces' directory goes
// (inotify), and every watchInterval besides, until the returned stop is
// called, which an owner does before it tears its lab down itself. Looking at
// once matters for saying who: `svclab down` is seen running only while the
// owner it signalled tears the lab down, which starts with the namespaces.
func watchLab(ctx context.Context, cancel context.CancelCauseFunc, dir string, r record.Lab, during string) (stop func()) {
	if dir == "" {
		dir = record.DefaultDir
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	changed, closeWatch := watchDirs(dir, namespaces.Dir)
	go func() {
		defer close(finished)
		tick := time.NewTicker(watchInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-changed:
			case <-tick.C:
			}
			if v := record.Gone(dir, &r, during); v != nil {
				cancel(v)
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		closeWatch()
	}
}

// watchDirs sends on the returned channel whenever an entry of one of dirs is
// removed or replaced; nil (never sends) when inotify is not to be had, which
// leaves watchLab its ticker.
func watchDirs(dirs ...string) (<-chan struct{}, func()) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, func() {}
	}
	for _, d := range dirs {
		unix.InotifyAddWatch(fd, d, unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_DELETE_SELF)
	}
	// Non-blocking, so that Go's poller serves the reads and Close ends one
	// under way.
	f := os.NewFile(uintptr(fd), "inotify")
	changed := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	return changed, func() { f.Close() }
}

// watchInterval is how often watchLab looks at a lab besides when an entry
// goes: a check's attempt takes up to seconds, so a lab gone is seen within
// about one.
const watchInterval = 500 * time.Millisecond

// vanishedCause is ctx's cause when it is a lab taken down, for the error a
// command returns instead of the "context canceled" its steps saw.
func vanishedCause(ctx context.Context) (*record.Vanished, bool) {
	var v *record.Vanished
	ok := errors.As(context.Cause(ctx), &v)
	return v, ok
}

// againstLab runs fn, a command's work on the running lab r that another
// process owns (trace, exec), with a context that ends when the lab stops being
// whole under it; fn's error is then the *record.Vanished saying so, in place
// of what its cut-short steps saw ("context canceled", a killed iptables).
func againstLab(ctx context.Context, r *record.Lab, during string, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := watchLab(ctx, cancel, record.DefaultDir, *r, during)
	err := fn(ctx)
	stop()
	if err == nil {
		return nil
	}
	if v, ok := vanishedCause(ctx); ok {
		return v
	}
	// Gone between two looks of the watch, or the failure came first.
	if v := record.Gone(record.DefaultDir, r, during); v != nil {
		return v
	}
	return err
}
