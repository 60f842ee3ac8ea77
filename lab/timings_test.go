package lab

import (
	"testing"
	"time"

	"github.com/svclab/svclab/lab/record"
)

// TestTimingsByStartThenEnd: the phases come out in the order they began, the
// shorter first of two that began together, and nothing is recorded once the
// start is over (a later sync is a change, not the start).
func TestTimingsByStartThenEnd(t *testing.T) {
	start := time.Now().Add(-10 * time.Second)
	tm := &timings{start: start}
	tm.add("late", start.Add(5*time.Second))
	tm.add("early", start.Add(time.Second))
	tm.add("first", start)
	got := tm.finish()
	tm.add("after the start", start.Add(6*time.Second))
	want := []string{"first", "early", "late"}
	if len(got) != len(want) {
		t.Fatalf("got %d phases, want %d: %+v", len(got), len(want), got)
	}
	for i, p := range got {
		if p.Name != want[i] {
			t.Errorf("phase %d is %q, want %q (all: %+v)", i, p.Name, want[i], got)
		}
	}
	if got[1].StartMS != 1000 || got[1].TookMS < 8900 {
		t.Errorf("early: start %d ms, took %d ms; want 1000 ms and about 9000 ms", got[1].StartMS, got[1].TookMS)
	}
	if again := tm.finish(); len(again) != 3 {
		t.Errorf("a phase added after finish was kept: %+v", again)
	}
	tm2 := &timings{start: start}
	tm2.add("b", start.Add(2*time.Second))
	tm2.add("a", start)
	tm2.phases[1].TookMS = 500
	tm2.phases = append(tm2.phases, record.Phase{Name: "a-short", StartMS: 0, TookMS: 100})
	if got := tm2.finish(); got[0].Name != "a-short" || got[1].Name != "a" {
		t.Errorf("two phases begun together: got %+v, want the shorter first", got)
	}
}
