package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"
	_ "github.com/svclab/svclab/lab/proxy/nftables"
)

// slowest is how many specs the timing table names.
const slowest = 20

// noMode stands for the specs of no mode (the CLI's, the records', ...).
const noMode = "(no mode)"

// timed is one spec that ran, with what the tables group it by.
type timed struct {
	text   string
	mode   string
	labels []string
	took   time.Duration
}

// specMode is the mode a spec ran in: its label that names a run of a proxier
// (proxy.ParseRun), as the suite labels each mode's specs.
func specMode(labels []string) string {
	for _, l := range labels {
		if _, err := proxy.ParseRun(l); err == nil {
			return l
		}
	}
	return noMode
}

// printTiming writes where a run's time went: the slowest specs with their
// mode, and the sum per mode and per label, so that the next person sees what
// to cut. A spec's time is its own process's; with parallel processes the sums
// add up to more than the run took.
func printTiming(w io.Writer, name string, specs []timed) {
	if len(specs) == 0 {
		return
	}
	sort.SliceStable(specs, func(i, j int) bool { return specs[i].took > specs[j].took })
	var total time.Duration
	perMode, perLabel := map[string]time.Duration{}, map[string]time.Duration{}
	modeCount, labelCount := map[string]int{}, map[string]int{}
	for _, s := range specs {
		total += s.took
		perMode[s.mode] += s.took
		modeCount[s.mode]++
		for _, l := range s.labels {
			if l != s.mode {
				perLabel[l] += s.took
				labelCount[l]++
			}
		}
	}
	fmt.Fprintf(w, "\n%s: the %d slowest of %d specs (%s of spec time in all):\n", name, min(slowest, len(specs)), len(specs), seconds(total))
	for _, s := range specs[:min(slowest, len(specs))] {
		fmt.Fprintf(w, "%9s  %-26s  %s\n", seconds(s.took), s.mode, s.text)
	}
	printSums(w, name+": spec time per mode", perMode, modeCount)
	printSums(w, name+": spec time per label (a spec counts under each of its labels)", perLabel, labelCount)
}

func printSums(w io.Writer, title string, sums map[string]time.Duration, counts map[string]int) {
	keys := make([]string, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if sums[keys[i]] != sums[keys[j]] {
			return sums[keys[i]] > sums[keys[j]]
		}
		return keys[i] < keys[j]
	})
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, k := range keys {
		fmt.Fprintf(w, "%9s  %4d specs  %s\n", seconds(sums[k]), counts[k], k)
	}
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// timedSpec is what the tables need of a spec report.
func timedSpec(s types.SpecReport) timed {
	labels := s.Labels()
	return timed{text: s.FullText(), mode: specMode(labels), labels: labels, took: s.RunTime}
}
