package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Combine writes dir/summary.md over the report directories dir/vm and dir/host
// (whichever exist): one page with both runs, each whole and apart. Figures from
// two kernels are never put in one table: the VM is an emulated machine an order
// of magnitude slower, and only ratios within one run mean anything.
func Combine(dir, command string) error {
	var b strings.Builder
	b.WriteString("# svclab bench\n\n")
	if command != "" {
		fmt.Fprintf(&b, "Made by `%s`.\n\n", command)
	}
	b.WriteString("Each part below is one run on one kernel, with its own raw CSV (`results.csv`, a row per measurement), machine record (`machine.json`) and plots. " +
		"Compare modes and methods within a part; never a figure of one part with a figure of the other.\n\n")
	var parts []*Report
	var names []string
	for _, p := range Parts {
		if _, err := os.Stat(filepath.Join(dir, p, ResultsFile)); err != nil {
			continue
		}
		r, err := Load(filepath.Join(dir, p))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		parts = append(parts, r)
		names = append(names, p)
	}
	if len(parts) == 0 {
		return fmt.Errorf("%s: no report directory (%s) to combine", dir, strings.Join(Parts, ", "))
	}
	for i, r := range parts {
		what := strings.Join(r.Config.Modes, " and ") + " natively, on this machine's kernel"
		if names[i] == WhereVM {
			what = "every mode side by side in svclab's VM (one guest kernel)"
		}
		fmt.Fprintf(&b, "- [%s](%s/%s): %s, %s, took %s\n", names[i], names[i], SummaryFile, what, r.Machine.Kernel, r.Elapsed)
	}
	for i, r := range parts {
		plots, err := existingPlots(filepath.Join(dir, names[i]), r.Rows)
		if err != nil {
			return err
		}
		b.WriteString("\n")
		r.writeSummary(&b, 2, names[i]+"/", plots)
	}
	return os.WriteFile(filepath.Join(dir, SummaryFile), []byte(b.String()), 0o644)
}

// existingPlots redraws a report's plots (cheap, and it keeps the list of plots
// and the files in step).
func existingPlots(dir string, rows []Row) ([]plotFile, error) {
	if err := os.MkdirAll(filepath.Join(dir, PlotsDir), 0o755); err != nil {
		return nil, err
	}
	return writePlots(filepath.Join(dir, PlotsDir), rows)
}
