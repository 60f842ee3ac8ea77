package report

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// table is a Markdown table, the one way the summary prints one.
type table struct {
	head []string
	rows [][]string
}

func newTable(head ...string) *table { return &table{head: head} }

// add appends a row; a row shorter than the heading is padded with dashes.
func (t *table) add(cells ...string) {
	for len(cells) < len(t.head) {
		cells = append(cells, "–")
	}
	t.rows = append(t.rows, cells)
}

func (t *table) write(w io.Writer) {
	fmt.Fprintln(w, "| "+strings.Join(t.head, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat("---|", len(t.head)))
	for _, r := range t.rows {
		fmt.Fprintln(w, "| "+strings.Join(r, " | ")+" |")
	}
}

// fmtSeconds prints a duration in the unit that suits it.
func fmtSeconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v < 1e-3:
		return fmt.Sprintf("%.0f µs", v*1e6)
	case v < 1:
		return fmt.Sprintf("%.3g ms", v*1e3)
	default:
		return fmt.Sprintf("%.3g s", v)
	}
}

func signedSeconds(v float64) string {
	if v < 0 {
		return "−" + fmtSeconds(-v)
	}
	return "+" + fmtSeconds(v)
}

// fmtCount prints a count, or a dash when there is none.
func fmtCount(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v[0])
}

func heading(w io.Writer, level int, text string) {
	fmt.Fprintf(w, "\n%s %s\n\n", strings.Repeat("#", level), text)
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
