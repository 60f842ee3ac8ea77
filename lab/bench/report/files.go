package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/svclab/svclab/lab/bench"
)

// Files a report directory holds: the record of a run (results.csv,
// machine.json) and what is drawn from it (summary.md, plots/*.png).
const (
	ResultsFile = "results.csv"
	SummaryFile = "summary.md"
	MachineFile = "machine.json"
	PlotsDir    = "plots"
)

// meta is machine.json: everything of a report but its rows.
type meta struct {
	Machine  bench.Machine `json:"machine"`
	Command  string        `json:"command"`
	Started  time.Time     `json:"started"`
	Elapsed  string        `json:"elapsed"`
	Settings settings      `json:"settings"`
	Notes    []string      `json:"notes"`
	// Interrupted says the run was stopped from outside; notRun lists the
	// labs that did not run whole.
	Interrupted string   `json:"interrupted,omitempty"`
	NotRun      []string `json:"notRun,omitempty"`
}

// settings is the Config as recorded.
type settings struct {
	Services       []int    `json:"services"`
	Endpoints      []int    `json:"endpoints"`
	Modes          []string `json:"modes"`
	Methods        []string `json:"methods"`
	Backends       []string `json:"backends"`
	KubeProxyModes []string `json:"kubeProxyModes,omitempty"`
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

func settingsOf(c bench.Config) settings {
	return settings{
		Services: c.Services, Endpoints: c.Endpoints, Modes: c.Modes, Methods: c.Methods, Backends: c.Backends, KubeProxyModes: c.KubeProxyModes,
		Reps: c.Reps, MinReps: c.MinReps, CellBudget: c.CellBudget.String(), PerRuleCap: c.PerRuleCap.String(),
		ColdCap: c.ColdCap.String(), Deadline: c.Deadline.String(),
		OverheadPairs: c.OverheadPairs, Connects: c.Connects, ProbeInterval: c.ProbeInterval.String(),
		AttemptTimeout: c.AttemptTimeout.String(), ProbeWorkers: c.ProbeWorkers, Grace: c.Grace.String(),
	}
}

func (s settings) config(where string) bench.Config {
	c := bench.Config{
		Services: s.Services, Endpoints: s.Endpoints, Modes: s.Modes, Methods: s.Methods, Backends: s.Backends, KubeProxyModes: s.KubeProxyModes,
		Reps: s.Reps, MinReps: s.MinReps, OverheadPairs: s.OverheadPairs, Connects: s.Connects,
		ProbeWorkers: s.ProbeWorkers, Where: where,
	}
	c.CellBudget, _ = time.ParseDuration(s.CellBudget)
	c.PerRuleCap, _ = time.ParseDuration(s.PerRuleCap)
	c.ColdCap, _ = time.ParseDuration(s.ColdCap)
	c.Deadline, _ = time.ParseDuration(s.Deadline)
	c.ProbeInterval, _ = time.ParseDuration(s.ProbeInterval)
	c.AttemptTimeout, _ = time.ParseDuration(s.AttemptTimeout)
	c.Grace, _ = time.ParseDuration(s.Grace)
	return c
}

// WriteRecord puts the run's record into dir: results.csv and machine.json.
// Write, or Publish over a directory of parts, draws the rest from it.
func WriteRecord(dir string, r *bench.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeCSVFile(filepath.Join(dir, ResultsFile), r.Rows); err != nil {
		return err
	}
	m := meta{Machine: r.Machine, Command: r.Command, Started: r.Started, Elapsed: r.Elapsed.Round(time.Second).String(),
		Settings: settingsOf(r.Config), Notes: r.Notes, Interrupted: r.Interrupted, NotRun: r.NotRun}
	if m.Notes == nil {
		m.Notes = []string{}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, MachineFile), append(b, '\n'), 0o644)
}

// Write puts the whole report into dir: its record, summary.md and
// plots/*.png.
func Write(dir string, r *bench.Report) error {
	if err := WriteRecord(dir, r); err != nil {
		return err
	}
	_, err := render(dir, r)
	return err
}

// Load reads a report directory's record back (rows, machine, settings,
// notes), the rows of an older bench under today's metric names.
func Load(dir string) (*bench.Report, error) {
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
	return &bench.Report{Config: m.Settings.config(m.Machine.Where), Machine: m.Machine, Command: m.Command,
		Started: m.Started, Elapsed: el, Rows: upgradeRows(rows), Notes: m.Notes,
		Interrupted: m.Interrupted, NotRun: m.NotRun}, nil
}
