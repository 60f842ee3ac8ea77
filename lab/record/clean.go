package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
)

// NamespacePrefix starts the name of every network namespace svclab creates, so
// Clean and a look at `ip netns list` find them all.
const NamespacePrefix = "svclab-"

// CleanReport says what Clean removed and what it left running.
type CleanReport struct {
	Labs       []string // IDs of leftover labs removed
	Namespaces []string // namespaces removed, recorded or not
	Running    []string // IDs of labs left alone because their owner still runs
	Corrupt    []string // corrupt records removed
	// Traces are what killed traces left in labs, running or not, and
	// Clean removed (only those that left something).
	Traces []KilledTraces
}

// Clean removes what killed labs left behind: the namespaces of every recorded lab
// whose owner process is gone, every svclab namespace no live lab records, stale
// and corrupt records. With all, running labs are stopped too: their owners get SIGTERM (and
// SIGKILL if they do not end within five seconds), then their namespaces go.
func Clean(dir string, all bool) (CleanReport, error) {
	if dir == "" {
		dir = DefaultDir
	}
	var rep CleanReport
	// What is there is listed before the records are read. A lab records
	// itself before it creates anything, so a namespace or run directory listed
	// here that belongs to a lab being built has its record read below, with a
	// live owner, and is left alone; what `up` creates after this listing is
	// never seen at all.
	names, nsErr := namespaces.List(NamespacePrefix)
	if nsErr != nil {
		return rep, nsErr
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return rep, err
	}
	recs, bad, err := Scan(dir)
	if err != nil {
		return rep, err
	}
	live := map[string]bool{}
	var errs []error
	// A corrupt record names no owner and no namespace: it goes, and its
	// lab's namespaces, if any, go below with every one no live lab records.
	for _, c := range bad {
		if err := Remove(dir, strings.TrimSuffix(filepath.Base(c.Path), ".json")); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Corrupt = append(rep.Corrupt, c.Path)
	}
	for _, r := range recs {
		// A killed trace's monitors hold the lab's namespaces after they are
		// deleted, and its record goes with the run directory: both go
		// first, in running labs too.
		k, err := RemoveKilledTraces(dir, r.ID)
		errs = append(errs, err)
		if k.Removed() {
			rep.Traces = append(rep.Traces, k)
		}
		if r.Owner.Alive() {
			if !all {
				rep.Running = append(rep.Running, r.ID)
				for _, m := range r.Members {
					live[m.NetNS] = true
				}
				continue
			}
			stop(r.Owner)
		}
		removed, err := Teardown(dir, r)
		rep.Namespaces = append(rep.Namespaces, removed...)
		errs = append(errs, err)
		rep.Labs = append(rep.Labs, r.ID)
	}
	// The monitors of killed traces a stray run directory (one no record
	// names any more) records are ended before it goes.
	for _, e := range entries {
		if !e.IsDir() || slices.Contains(rep.Running, e.Name()) || slices.Contains(rep.Labs, e.Name()) {
			continue
		}
		k, err := RemoveKilledTraces(dir, e.Name())
		errs = append(errs, err)
		if k.Removed() {
			rep.Traces = append(rep.Traces, k)
		}
	}
	for _, name := range names {
		if live[name] || slices.Contains(rep.Namespaces, name) || !namespaces.Exists(name) {
			continue
		}
		if err := namespaces.Delete(name); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Namespaces = append(rep.Namespaces, name)
	}
	errs = append(errs, removeStrayDirs(dir, entries, rep.Running))
	return rep, errors.Join(errs...)
}

// stop ends a lab's owner, which tears its lab down on SIGTERM.
func stop(p Process) {
	p.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(5 * time.Second)
	for p.Alive() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	p.Signal(syscall.SIGKILL)
}

// removeStrayDirs deletes, of the entries listed in dir, the run directories
// and half-written records of every lab but the running ones; a record being
// written (its writer, named in the temporary file's name, still runs) stays.
func removeStrayDirs(dir string, entries []os.DirEntry, running []string) error {
	keep := map[string]bool{}
	for _, id := range running {
		keep[id] = true
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		id, writer, isTmp := tmpOf(name)
		switch {
		case isTmp:
			if keep[id] || (writer > 0 && ProcessOf(writer).Start != 0) {
				continue
			}
		case e.IsDir():
			if keep[name] {
				continue
			}
		default:
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean %s: %w", dir, err)
	}
	return nil
}

// Teardown deletes a recorded lab's namespaces and its record, for a lab whose owner
// is gone. It returns the namespaces it deleted.
func Teardown(dir string, r *Lab) ([]string, error) {
	var removed []string
	var errs []error
	for _, c := range r.Components {
		// Only the recorded process: Signal checks its start time first.
		if err := c.Process.Signal(syscall.SIGKILL); err != nil {
			errs = append(errs, fmt.Errorf("lab %s: end %s (pid %d): %w", r.ID, c.Name, c.Process.PID, err))
		}
	}
	for _, m := range r.Members {
		if !namespaces.Exists(m.NetNS) {
			continue
		}
		if err := namespaces.Delete(m.NetNS); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, m.NetNS)
	}
	if len(errs) > 0 {
		return removed, errors.Join(errs...)
	}
	return removed, Remove(dir, r.ID)
}
