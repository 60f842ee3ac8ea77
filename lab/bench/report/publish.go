package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/svclab/svclab/lab/bench"
)

// Parts of a combined output directory: the run in svclab's VM and the one on
// the host, each a report directory of its own.
var Parts = []string{bench.WhereVM, bench.WhereHost}

// render draws r's plots into dir and writes its summary.md; the analysis it
// returns has every fit computed, for a page that shows r again.
func render(dir string, r *bench.Report) (*rendered, error) {
	a := analyse(r)
	files, err := drawPlots(dir, a.plots())
	if err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	var b strings.Builder
	a.writeSummary(&b, 1, "", files)
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return &rendered{a, files}, nil
}

// rendered is a report drawn once: its analysis and its plots.
type rendered struct {
	a     *analysis
	plots []plotFile
}

// Publish draws every part of dir that holds a record (dir/vm, dir/host: their
// summary.md and plots, each plot once) and writes dir/summary.md: one page
// with both runs, each whole and apart. Figures from two kernels are never put
// in one table: the VM is an emulated machine an order of magnitude slower,
// and only ratios within one run mean anything. notes (what did not run) are
// said first.
func Publish(dir, command string, notes ...string) error {
	var parts []*rendered
	var names []string
	for _, p := range Parts {
		if _, err := os.Stat(filepath.Join(dir, p, ResultsFile)); err != nil {
			continue
		}
		r, err := Load(filepath.Join(dir, p))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rd, err := render(filepath.Join(dir, p), r)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		parts = append(parts, rd)
		names = append(names, p)
	}
	if len(parts) == 0 {
		return fmt.Errorf("%s: no report directory (%s) to publish", dir, strings.Join(Parts, ", "))
	}
	var b strings.Builder
	b.WriteString("# svclab bench\n\n")
	if command != "" {
		fmt.Fprintf(&b, "Made by `%s`.\n\n", command)
	}
	for _, n := range notes {
		b.WriteString(n + "\n\n")
	}
	b.WriteString("Each part below is one run on one kernel, with its own raw CSV (`results.csv`, a row per measurement), machine record (`machine.json`) and plots. " +
		"Compare modes and methods within a part; never a figure of one part with a figure of the other.\n\n")
	for i, rd := range parts {
		r := rd.a.r
		what := strings.Join(r.Config.Modes, " and ") + " natively, on this machine's kernel"
		if names[i] == bench.WhereVM {
			what = "every mode side by side in svclab's VM (one guest kernel)"
		}
		fmt.Fprintf(&b, "- [%s](%s/%s): %s, %s, took %s\n", names[i], names[i], SummaryFile, what, r.Machine.Kernel, r.Elapsed)
	}
	for i, rd := range parts {
		b.WriteString("\n")
		rd.a.writeSummary(&b, 2, names[i]+"/", rd.plots)
	}
	return os.WriteFile(filepath.Join(dir, SummaryFile), []byte(b.String()), 0o644)
}
