package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

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
}

// Files a report directory holds.
const (
	ResultsFile = "results.csv"
	SummaryFile = "summary.md"
	MachineFile = "machine.json"
	PlotsDir    = "plots"
)

// meta is machine.json: everything of a report but its rows.
type meta struct {
	Machine  Machine   `json:"machine"`
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Elapsed  string    `json:"elapsed"`
	Settings settings  `json:"settings"`
	Notes    []string  `json:"notes"`
}

// settings is the Config as recorded.
type settings struct {
	Services       []int    `json:"services"`
	Endpoints      []int    `json:"endpoints"`
	Modes          []string `json:"modes"`
	Methods        []string `json:"methods"`
	Backends       []string `json:"backends"`
	Reps           int      `json:"reps"`
	MinReps        int      `json:"minReps"`
	CellBudget     string   `json:"cellBudget"`
	PerRuleCap     string   `json:"perRuleCap"`
	ColdCap        string   `json:"coldCap"`
	Deadline       string   `json:"deadline"`
	OverheadPairs  int      `json:"overheadPairs"`
	Connects       int      `json:"connects"`
	ProbeInterval  string   `json:"probeInterval"`
	AttemptTimeout string   `json:"attemptTimeout"`
	ProbeWorkers   int      `json:"probeWorkers"`
	Grace          string   `json:"grace"`
}

func settingsOf(c Config) settings {
	return settings{
		Services: c.Services, Endpoints: c.Endpoints, Modes: c.Modes, Methods: c.Methods, Backends: c.Backends,
		Reps: c.Reps, MinReps: c.MinReps, CellBudget: c.CellBudget.String(), PerRuleCap: c.PerRuleCap.String(),
		ColdCap: c.ColdCap.String(), Deadline: c.Deadline.String(),
		OverheadPairs: c.OverheadPairs, Connects: c.Connects, ProbeInterval: c.ProbeInterval.String(),
		AttemptTimeout: c.AttemptTimeout.String(), ProbeWorkers: c.ProbeWorkers, Grace: c.Grace.String(),
	}
}

// Write puts the report into dir: results.csv, machine.json, summary.md and
// plots/*.png.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, PlotsDir), 0o755); err != nil {
		return err
	}
	if err := writeCSVFile(filepath.Join(dir, ResultsFile), r.Rows); err != nil {
		return err
	}
	m := meta{Machine: r.Machine, Command: r.Command, Started: r.Started, Elapsed: r.Elapsed.Round(time.Second).String(),
		Settings: settingsOf(r.Config), Notes: r.Notes}
	if m.Notes == nil {
		m.Notes = []string{}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, MachineFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	plots, err := writePlots(filepath.Join(dir, PlotsDir), r.Rows)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	var sb strings.Builder
	r.writeSummary(&sb, 1, "", plots)
	return os.WriteFile(filepath.Join(dir, SummaryFile), []byte(sb.String()), 0o644)
}

// Load reads a report directory back (rows, machine, notes; enough to summarise
// it again or combine it with another).
func Load(dir string) (*Report, error) {
	f, err := os.Open(filepath.Join(dir, ResultsFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := ReadCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ResultsFile), err)
	}
	b, err := os.ReadFile(filepath.Join(dir, MachineFile))
	if err != nil {
		return nil, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, MachineFile), err)
	}
	el, _ := time.ParseDuration(m.Elapsed)
	c := Config{
		Services: m.Settings.Services, Endpoints: m.Settings.Endpoints, Modes: m.Settings.Modes,
		Methods: m.Settings.Methods, Backends: m.Settings.Backends, Reps: m.Settings.Reps, MinReps: m.Settings.MinReps,
		OverheadPairs: m.Settings.OverheadPairs, Connects: m.Settings.Connects, ProbeWorkers: m.Settings.ProbeWorkers,
		Where: m.Machine.Where,
	}
	c.CellBudget, _ = time.ParseDuration(m.Settings.CellBudget)
	c.PerRuleCap, _ = time.ParseDuration(m.Settings.PerRuleCap)
	c.ColdCap, _ = time.ParseDuration(m.Settings.ColdCap)
	c.Deadline, _ = time.ParseDuration(m.Settings.Deadline)
	c.ProbeInterval, _ = time.ParseDuration(m.Settings.ProbeInterval)
	c.AttemptTimeout, _ = time.ParseDuration(m.Settings.AttemptTimeout)
	c.Grace, _ = time.ParseDuration(m.Settings.Grace)
	return &Report{Config: c, Machine: m.Machine, Command: m.Command, Started: m.Started, Elapsed: el, Rows: rows, Notes: m.Notes}, nil
}

// series groups rows by subject, size and metric.
type series struct {
	values map[seriesKey][]float64
}

type seriesKey struct {
	s      subject
	n, e   int
	metric string
}

func newSeries(rows []Row) *series {
	sr := &series{values: map[seriesKey][]float64{}}
	for _, r := range rows {
		k := seriesKey{subject{r.Mode, r.Method, r.Backend}, r.Services, r.Endpoints, r.Metric}
		sr.values[k] = append(sr.values[k], r.Value)
	}
	return sr
}

func (sr *series) get(s subject, n, e int, metric string) []float64 {
	return sr.values[seriesKey{s, n, e, metric}]
}

// subjects lists the subjects that have metric, in reading order: iptables
// methods from the oldest way to svclab's own, nft before legacy, then the
// bare restore, then other modes.
func (sr *series) subjects(metric string) []subject {
	seen := map[subject]bool{}
	for k := range sr.values {
		if metric == "" || k.metric == metric {
			seen[k.s] = true
		}
	}
	out := make([]subject, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b subject) int { return strings.Compare(sortKey(a), sortKey(b)) })
	return out
}

func sortKey(s subject) string {
	modeRank := map[string]string{"iptables": "0", "ipvs": "1"}
	methodRank := map[string]string{MethodFull: "0", MethodPartial: "1", MethodChanged: "2", MethodPerRule: "3", "bare-restore": "4"}
	backendRank := map[string]string{"nft": "0", "legacy": "1"}
	rank := func(m map[string]string, k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return "9" + k
	}
	return rank(modeRank, s.mode) + "|" + rank(backendRank, s.backend) + "|" + rank(methodRank, s.method)
}

// sizes lists the N and E values present.
func (sr *series) sizes() (ns, es []int) {
	for k := range sr.values {
		ns = append(ns, k.n)
		es = append(es, k.e)
	}
	slices.Sort(ns)
	slices.Sort(es)
	return slices.Compact(ns), slices.Compact(es)
}
