package bench

import (
	"strings"
	"sync"
	"time"
)

// Row is one measurement. Mode is the proxy mode; Method how the rules are
// written (one of the mode's Methods, or BareMethod); Backend the mode's
// variant (its Name; empty for a mode without variants); Services and
// Endpoints are N and E; Rep numbers repeated samples of one metric from 0.
//
// Metrics: PHASE_sync is a sync as the bench timed it, PHASE being cold (from
// an empty node), restart (a new proxier over the rules there), change or add;
// PHASE_part_NAME the parts of it the proxier reports, PHASE_own those that are
// not housekeeping (proxy.Part), PHASE_NAME the counts it reports;
// PHASE_programming, PHASE_poll_interval and PHASE_failed the prober's;
// kernel_memory and kernel_NAME what the kernel holds after the cold sync;
// connect_TARGET the data path's handshakes and connect_TARGET_failures.
type Row struct {
	Mode      string
	Method    string
	Backend   string
	Services  int
	Endpoints int
	Metric    string
	Rep       int
	Value     float64
	Unit      string
}

// Subject is one mode, method and variant: one line on the plots.
type Subject struct {
	Mode, Method, Backend string
}

// SubjectOf is the subject a row measures.
func SubjectOf(r Row) Subject { return Subject{r.Mode, r.Method, r.Backend} }

func (s Subject) String() string {
	out := s.Mode + "/" + s.Method
	if s.Backend != "" {
		out += "/" + s.Backend
	}
	return out
}

// Bare is the subject of the bare apply set beside s's cold sync.
func (s Subject) Bare() Subject { return Subject{s.Mode, BareMethod, s.Backend} }

// Units.
const (
	UnitSeconds = "s"
	UnitCount   = "count"
	UnitBytes   = "bytes"
)

// unitOfCount is the unit of a count a proxier reports (proxy.SyncStats).
func unitOfCount(name string) string {
	if strings.HasSuffix(name, "_bytes") {
		return UnitBytes
	}
	return UnitCount
}

// Results collects rows as they are measured. Safe for concurrent use.
type Results struct {
	mu   sync.Mutex
	rows []Row
}

// Add appends one row.
func (r *Results) Add(row Row) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row)
}

// Rows returns a copy of every row, in the order measured.
func (r *Results) Rows() []Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Row(nil), r.rows...)
}

// Report is one run's measurements and what is known about them.
type Report struct {
	Config  Config
	Machine Machine
	// Command is the command line that made the run, for the summary.
	Command string
	Started time.Time
	Elapsed time.Duration
	Rows    []Row
	// Notes say what was cut short or failed, and why.
	Notes []string
	// Interrupted, when set, says the run was stopped from outside (Ctrl-C,
	// SIGTERM) and when; NotRun names every lab that did not run whole then.
	Interrupted string
	NotRun      []string
}
