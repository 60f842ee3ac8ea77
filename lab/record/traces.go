package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
)

// Trace is what a running `svclab trace` has put into a lab, recorded in the
// lab's run directory before it creates anything, so that a trace killed with
// SIGKILL (which runs no deferred cleanup) leaves nothing that `svclab down`,
// `svclab clean` or the next trace on the lab cannot find and remove.
type Trace struct {
	// Port is the traced flow's source port; Table the name of the nf_tables
	// table (family ip) the trace adds to every namespace in Namespaces.
	Port       int      `json:"port"`
	Table      string   `json:"table"`
	Namespaces []string `json:"namespaces"`
	// Writer is the trace's process: its record is a leftover once it is gone.
	Writer Process `json:"writer"`
	// Monitors are the trace event readers it started (xtables-monitor, nft
	// monitor), each by PID and start time, so that a PID another process got
	// since is never signalled.
	Monitors []Process `json:"monitors,omitempty"`
}

// TraceTable is the temporary table of a trace from source port port: one
// per trace, so that two traces in one lab do not share it.
func TraceTable(port int) string { return TraceTablePrefix + strconv.Itoa(port) }

// TraceTablePrefix starts the name of every trace table.
const TraceTablePrefix = "svclab-trace-"

// traceFile is the record of the trace t of lab id.
func traceFile(dir, id string, t *Trace) string {
	return filepath.Join(RunDir(dir, id), fmt.Sprintf("trace-%d-%d.json", t.Writer.PID, t.Port))
}

// WriteTrace records t, a trace of lab id, whole: through a temporary file
// renamed into place, so that a reader never sees half of it.
func WriteTrace(dir, id string, t *Trace) error {
	if dir == "" {
		dir = DefaultDir
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(RunDir(dir, id), 0o755); err != nil {
		return fmt.Errorf("lab %s: record trace %s: %w", id, t.Table, err)
	}
	path := traceFile(dir, id, t)
	tmp := fmt.Sprintf("%s.%d%s", path, os.Getpid(), tmpSuffix)
	err = os.WriteFile(tmp, b, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("lab %s: record trace %s: %w", id, t.Table, err)
	}
	return nil
}

// RemoveTrace removes the record of a trace that removed what it created.
func RemoveTrace(dir, id string, t *Trace) error {
	if dir == "" {
		dir = DefaultDir
	}
	if err := os.Remove(traceFile(dir, id, t)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lab %s: trace %s: %w", id, t.Table, err)
	}
	return nil
}

// KilledTraces is what RemoveKilledTraces removed from one lab.
type KilledTraces struct {
	Lab string
	// Traces is how many killed traces' records were found; Tables and
	// Monitors what of theirs was still there and is gone now.
	Traces, Tables, Monitors int
}

// Removed tells whether anything a killed trace left was removed.
func (k KilledTraces) Removed() bool { return k.Tables+k.Monitors > 0 }

func (k KilledTraces) String() string {
	whose := "a killed trace's"
	if k.Traces > 1 {
		whose = fmt.Sprintf("%d killed traces'", k.Traces)
	}
	return fmt.Sprintf("lab %s: removed %s leftovers: %d trace %s, %d monitor %s",
		k.Lab, whose, k.Tables, plural(k.Tables, "table", "tables"), k.Monitors, plural(k.Monitors, "process", "processes"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// RemoveKilledTraces removes what the traces of lab id whose process is gone
// left: their tables in the namespaces they recorded, their monitors that
// still run (only the recorded processes: PID and start time), their records,
// and half-written records of writers that are gone. The traces that still
// run are left alone.
func RemoveKilledTraces(dir, id string) (KilledTraces, error) {
	if dir == "" {
		dir = DefaultDir
	}
	k := KilledTraces{Lab: id}
	run := RunDir(dir, id)
	entries, err := os.ReadDir(run)
	if errors.Is(err, fs.ErrNotExist) {
		return k, nil
	}
	if err != nil {
		return k, fmt.Errorf("lab %s: traces: %w", id, err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "trace-") {
			continue
		}
		path := filepath.Join(run, name)
		if _, writer, ok := tmpOf(name); ok {
			// A record being written names nothing the trace created yet
			// (it creates nothing before the rename), nor after: the
			// renamed record does.
			if writer > 0 && ProcessOf(writer).Start == 0 {
				os.Remove(path)
			}
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing: its trace ended
		}
		var t Trace
		if err == nil {
			err = json.Unmarshal(b, &t)
		}
		if err != nil || !strings.HasPrefix(t.Table, TraceTablePrefix) {
			errs = append(errs, fmt.Errorf("lab %s: trace record %s is unreadable (%v): left in place", id, path, err))
			continue
		}
		if t.Writer.Alive() {
			continue
		}
		k.Traces++
		// The monitors first: one that still runs holds its namespace.
		for _, p := range t.Monitors {
			killed, err := kill(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("lab %s: trace %s: monitor %d: %w", id, t.Table, p.PID, err))
			}
			if killed {
				k.Monitors++
			}
		}
		var failed bool
		for _, ns := range t.Namespaces {
			if !strings.HasPrefix(ns, NamespacePrefix) {
				continue // no namespace of svclab's: not touched
			}
			removed, err := deleteTraceTable(ns, t.Table)
			if err != nil {
				failed = true
				errs = append(errs, fmt.Errorf("lab %s: trace %s: %w", id, t.Table, err))
			}
			if removed {
				k.Tables++
			}
		}
		if !failed {
			// Kept when a table could not be removed: the next one tries again.
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return k, errors.Join(errs...)
}

// deleteTraceTable deletes the trace table table in the namespace ns and
// tells whether it was there. A namespace or table that is gone (the trace
// had not created it yet, or had removed it already) is no error.
func deleteTraceTable(ns, table string) (bool, error) {
	if !namespaces.Exists(ns) {
		return false, nil
	}
	_, err := namespaces.Output(ns, "nft", "delete", "table", "ip", table)
	if err == nil {
		return true, nil
	}
	// nft says only "No such file or directory" for a missing table: the
	// table list tells it from a failure.
	out, listErr := namespaces.Output(ns, "nft", "list", "tables", "ip")
	if listErr == nil && !slices.Contains(strings.Fields(string(out)), table) {
		return false, nil
	}
	if !namespaces.Exists(ns) {
		return false, nil
	}
	return false, err
}

// killWait bounds the wait for a killed monitor to end: SIGKILL ends it at
// once, but a process in uninterruptible sleep ends when it wakes.
const killWait = 10 * time.Second

// kill ends the recorded process p with SIGKILL, if it is still p, and waits
// until it has ended (so that the namespace it held is released when kill
// returns). It tells whether p was still running. The process is held by a
// pidfd opened before its start time is compared: if it is the recorded one
// then, the signal reaches it and no other, even if its PID is reused.
func kill(p Process) (bool, error) {
	if p.PID <= 0 {
		return false, nil
	}
	fd, err := unix.PidfdOpen(p.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	if !p.Alive() {
		return false, nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("kill: %w", err)
	}
	// A pidfd polls readable when its process has ended.
	deadline := time.Now().Add(killWait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return true, fmt.Errorf("sent SIGKILL, still running after %s", killWait)
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return true, fmt.Errorf("wait for its end: %w", err)
		}
		if n > 0 {
			return true, nil
		}
	}
}
