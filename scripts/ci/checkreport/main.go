// Command checkreport reads Ginkgo JSON reports and fails unless every spec in them
// ran and passed: CI must not take a skipped or pending spec silently.
//
//	go run ./scripts/ci/checkreport REPORT.json...
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/onsi/ginkgo/v2/types"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: checkreport REPORT.json...")
		os.Exit(2)
	}
	bad := false
	for _, path := range os.Args[1:] {
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
		specs := 0
		for _, r := range reports {
			for _, s := range r.SpecReports {
				if s.LeafNodeType != types.NodeTypeIt {
					continue
				}
				specs++
				counts[s.State]++
				if s.State != types.SpecStatePassed {
					fmt.Printf("%s: %s: %s\n", path, s.State, s.FullText())
				}
			}
		}
		fmt.Printf("%s: %d specs, %d passed, %d failed, %d skipped, %d pending\n", path, specs,
			counts[types.SpecStatePassed], counts[types.SpecStateFailed]+counts[types.SpecStatePanicked]+counts[types.SpecStateTimedout]+counts[types.SpecStateAborted]+counts[types.SpecStateInterrupted],
			counts[types.SpecStateSkipped], counts[types.SpecStatePending])
		if specs == 0 || counts[types.SpecStatePassed] != specs {
			bad = true
		}
	}
	if bad {
		fmt.Println("checkreport: some specs did not run and pass; CI does not take a skipped spec silently")
		os.Exit(1)
	}
}
