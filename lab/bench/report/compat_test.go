package report

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/svclab/svclab/lab/bench"
)

// committed is the run docs/benchmarks.md shows, written before the bench
// named every sync's parts and counts alike.
const committed = "../../../docs/bench"

// The committed run stays readable: its record loads under today's names,
// passes today's checks, and draws again.
func TestCommittedRunStaysReadable(t *testing.T) {
	if err := CheckOutput(committed); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, p := range Parts {
		for _, f := range []string{ResultsFile, MachineFile} {
			b, err := os.ReadFile(filepath.Join(committed, p, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := Publish(dir, ""); err != nil {
		t.Fatal(err)
	}
	if err := CheckOutput(dir); err != nil {
		t.Fatal(err)
	}
	host, err := Load(filepath.Join(dir, bench.WhereHost))
	if err != nil {
		t.Fatal(err)
	}
	a := analyse(host)
	full := bench.Subject{Mode: "iptables", Method: "full", Backend: "nft"}
	for _, m := range []string{"cold_part_write", "cold_part_generate", "cold_own", "cold_rules", "kernel_rules"} {
		if len(a.get(full, 100, 2, m)) == 0 {
			t.Errorf("%s N=100 E=2: no %s read from the old names", full, m)
		}
	}
	own := a.get(full, 100, 2, "cold_own")[0]
	if sum := a.get(full, 100, 2, "cold_part_write")[0] + a.get(full, 100, 2, "cold_part_generate")[0]; own != sum {
		t.Errorf("cold_own %g, want generate + write %g", own, sum)
	}
}

func TestUpgradeRowsLeavesTodaysAlone(t *testing.T) {
	rows := []bench.Row{
		{Mode: "m", Method: "x", Metric: "cold_part_write", Value: 1, Unit: bench.UnitSeconds},
		{Mode: "m", Method: "x", Metric: "cold_own", Value: 1, Unit: bench.UnitSeconds},
		{Mode: "m", Method: "x", Metric: "kernel_rules", Value: 9, Unit: bench.UnitCount},
	}
	got := upgradeRows(rows)
	if len(got) != len(rows) {
		t.Fatalf("%d rows from %d", len(got), len(rows))
	}
	for i := range rows {
		if got[i] != rows[i] {
			t.Errorf("row %d changed: %+v", i, got[i])
		}
	}
}
