// Command checkreport reads Ginkgo JSON reports and fails unless every spec in them
// ran and passed: CI must not take a skipped or pending spec silently.
//
//	go run ./scripts/ci/checkreport [-label-filter EXPR] REPORT.json...
//
// With -label-filter (the suite's own, run with the same -ginkgo.label-filter),
// every spec whose labels match EXPR must have run and passed, and every other
// one must have been left out by it: the count of those is printed, so that a
// run of part of a suite says how much it left. After the verdict it prints
// where the time went: the 20 slowest specs with their mode, and the time per
// mode and per label.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/onsi/ginkgo/v2/types"
)

func main() {
	labelFilter := flag.String("label-filter", "", "the Ginkgo label filter the suite ran with: specs it leaves out must have been skipped, every other one must have passed")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: checkreport [-label-filter EXPR] REPORT.json...")
		os.Exit(2)
	}
	selected, err := types.ParseLabelFilter(*labelFilter)
	if err != nil {
		fmt.Fprintf(os.Stderr, "checkreport: -label-filter %q: %v\n", *labelFilter, err)
		os.Exit(2)
	}
	bad := false
	for _, path := range flag.Args() {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "checkreport:", err)
			os.Exit(2)
		}
		var reports []types.Report
		if err := json.Unmarshal(b, &reports); err != nil {
			fmt.Fprintf(os.Stderr, "checkreport: %s: %v\n", path, err)
			os.Exit(2)
		}
		counts := map[types.SpecState]int{}
		specs, left := 0, 0
		var ran []timed
		for _, r := range reports {
			for _, s := range r.SpecReports {
				if s.LeafNodeType != types.NodeTypeIt {
					continue
				}
				if !selected(s.Labels()) {
					left++
					if s.State != types.SpecStateSkipped {
						bad = true
						fmt.Printf("%s: %s, though -label-filter leaves it out: %s\n", path, s.State, s.FullText())
					}
					continue
				}
				specs++
				counts[s.State]++
				if s.State != types.SpecStateSkipped && s.State != types.SpecStatePending {
					ran = append(ran, timedSpec(s))
				}
				if s.State != types.SpecStatePassed {
					fmt.Printf("%s: %s: %s\n", path, s.State, s.FullText())
				}
			}
		}
		fmt.Printf("%s: %d specs, %d passed, %d failed, %d skipped, %d pending\n", path, specs,
			counts[types.SpecStatePassed], counts[types.SpecStateFailed]+counts[types.SpecStatePanicked]+counts[types.SpecStateTimedout]+counts[types.SpecStateAborted]+counts[types.SpecStateInterrupted],
			counts[types.SpecStateSkipped], counts[types.SpecStatePending])
		if *labelFilter != "" {
			fmt.Printf("%s: %d more left out by the label filter %q\n", path, left, *labelFilter)
		}
		if specs == 0 || counts[types.SpecStatePassed] != specs {
			bad = true
		}
		printTiming(os.Stdout, path, ran)
	}
	if bad {
		fmt.Println("checkreport: some specs did not run and pass; CI does not take a skipped spec silently")
		os.Exit(1)
	}
}
