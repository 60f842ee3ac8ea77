package main

import (
	"fmt"
	"io"

	"github.com/svclab/svclab/lab/record"
)

// printTimings prints the phases of a lab's start (`svclab up --timings`), in
// the order they began, each with its start, counted from the start of the
// build, and its duration; phases that ran side by side overlap.
func printTimings(w io.Writer, phases []record.Phase) {
	fmt.Fprintln(w, "\nTimings (from the start of the build; phases run side by side overlap):")
	fmt.Fprintf(w, "%8s  %8s  %s\n", "START", "TOOK", "PHASE")
	for _, p := range phases {
		fmt.Fprintf(w, "%8s  %8s  %s\n", seconds(p.StartMS), seconds(p.TookMS), p.Name)
	}
}

// seconds formats milliseconds as seconds with three decimals ("1.234s").
func seconds(ms int64) string { return fmt.Sprintf("%d.%03ds", ms/1000, ms%1000) }
