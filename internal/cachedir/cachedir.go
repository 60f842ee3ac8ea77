// Package cachedir is how svclab keeps what it makes once and reuses (the VM's
// kernels and guest images, the Kubernetes components' binary) under Root:
// root's /var/cache/svclab, an ordinary user's own (who reads root's entries
// too, see Fallback). Entries appear by rename, so readers need no lock; makers
// take the directory's lock, so two runs never make the same entry at once; and
// entries unused for a week go when a new one is made.
package cachedir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StaleAfter is how long an entry may go unused before Prune removes it.
const StaleAfter = 7 * 24 * time.Hour

// Lock takes the exclusive lock of dir (creating it). A run that has to wait
// calls waiting once and polls, so that ctx still ends the wait.
func Lock(ctx context.Context, dir string, waiting func()) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	if err := Owned(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	for said := false; ; {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("cache %s: lock: %w", dir, err)
		}
		if !said && waiting != nil {
			waiting()
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("cache %s: waiting for the lock: %w", dir, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// Owned says whether dir belongs to this user or to root, the only ones whose
// entries a run may trust: an ordinary user's cache may be in /tmp (a user
// without a home), where another user could have made the directory first and
// put a binary of theirs in it.
func Owned(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cache %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if euid := os.Geteuid(); int(st.Uid) != euid && st.Uid != 0 {
		return fmt.Errorf("cache %s: owned by uid %d, not by this user (uid %d) or root: set $%s to a directory of yours", dir, st.Uid, euid, Env)
	}
	return nil
}

// Touch marks an entry as used now.
func Touch(path string) {
	now := time.Now()
	os.Chtimes(path, now, now)
}

// Prune removes the entries of dir matching pattern whose stamp (the entry
// itself when stamp is empty, else the file stamp inside it) was not touched
// within StaleAfter, except keep, and leftovers of makers that died (names
// starting with ".build-" or ".fetch-"). removed is told of each entry removed.
// The caller holds dir's lock (Lock(ctx, dir, ...)): the .build-* and
// .fetch-* it removes are then no other maker's work under way. A lock of
// another directory (a cache of links into dir) would not say that.
func Prune(dir, pattern, stamp, keep string, removed func(path string, unused time.Duration)) {
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".build-*"))
	fetches, _ := filepath.Glob(filepath.Join(dir, ".fetch-*"))
	for _, p := range append(leftovers, fetches...) {
		os.RemoveAll(p)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, pattern))
	for _, p := range entries {
		if p == keep {
			continue
		}
		fi, err := os.Stat(filepath.Join(p, stamp))
		if err != nil || time.Since(fi.ModTime()) < StaleAfter {
			continue
		}
		if err := os.RemoveAll(p); err == nil && removed != nil {
			removed(p, time.Since(fi.ModTime()))
		}
	}
}
