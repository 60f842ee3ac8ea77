package main

import (
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/record"
)

// TestPrintTimings: each phase on a line of its own with its start and
// duration in seconds, in the order given.
func TestPrintTimings(t *testing.T) {
	var b strings.Builder
	printTimings(&b, []record.Phase{
		{Name: "namespaces and links", StartMS: 0, TookMS: 31},
		{Name: "kube-apiserver ready", StartMS: 250, TookMS: 2504},
		{Name: "lab up", StartMS: 0, TookMS: 12045},
	})
	out := b.String()
	for _, want := range []string{
		"   START      TOOK  PHASE\n",
		"  0.000s    0.031s  namespaces and links\n",
		"  0.250s    2.504s  kube-apiserver ready\n",
		"  0.000s   12.045s  lab up\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}
