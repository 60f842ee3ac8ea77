package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
}

// Clean removes what killed labs left behind: the namespaces of every recorded lab
// whose owner process is gone, every svclab namespace no live lab records, and stale
// records. With all, running labs are stopped too: their owners get SIGTERM (and
// SIGKILL if they do not end within five seconds), then their namespaces go.
func Clean(dir string, all bool) (CleanReport, error) {
	if dir == "" {
		dir = DefaultDir
	}
	var rep CleanReport
	recs, err := List(dir)
	if err != nil {
		return rep, err
	}
	live := map[string]bool{}
	var errs []error
	for _, r := range recs {
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
	names, err := namespaces.List(NamespacePrefix)
	errs = append(errs, err)
	for _, name := range names {
		if live[name] {
			continue
		}
		if err := namespaces.Delete(name); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Namespaces = append(rep.Namespaces, name)
	}
	errs = append(errs, removeStrayDirs(dir, rep.Running))
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

// removeStrayDirs deletes run directories and half-written records of every lab but
// the running ones.
func removeStrayDirs(dir string, running []string) error {
	keep := map[string]bool{}
	for _, id := range running {
		keep[id] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		id := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".tmp"), ".json")
		if keep[id] {
			continue
		}
		if e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("clean %s: %w", dir, errors.Join(errs...))
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
