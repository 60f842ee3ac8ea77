// Package report is `svclab bench`'s reporting: a run's record in a directory
// (results.csv, a row per measurement, and machine.json: the machine, the
// settings, the notes), what is drawn from it (summary.md with its tables and
// growth fits, plots/*.png), the page that joins a run in svclab's VM with one
// on the host (Publish), and the check of an output directory's shape
// (CheckOutput, CheckRecord), never of a timing.
//
// A report is analysed once: its rows grouped by subject, size and metric,
// every fit computed once, every plot drawn once, and the summary of a part
// and the combined page written from the same analysis. Records of older
// benches are read under today's metric names (see renamed).
package report
