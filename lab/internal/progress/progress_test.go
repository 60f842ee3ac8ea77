package progress

import (
	"testing"
	"time"
)

// TestWhileHeartbeats: a step slower than the interval gets a status call each
// interval, with a growing elapsed time. The step ends only once it saw three
// heartbeats, so the test waits for them rather than guessing a duration.
func TestWhileHeartbeats(t *testing.T) {
	beats := make(chan time.Duration, 100)
	var elapsed []time.Duration
	While(10*time.Millisecond, func(d time.Duration) { beats <- d }, func() {
		deadline := time.After(30 * time.Second)
		for len(elapsed) < 3 {
			select {
			case d := <-beats:
				elapsed = append(elapsed, d)
			case <-deadline:
				t.Errorf("30 s into a slow step, %d heartbeats", len(elapsed))
				return
			}
		}
	})
	for i := 1; i < len(elapsed); i++ {
		if elapsed[i] <= elapsed[i-1] {
			t.Errorf("elapsed times %v do not grow", elapsed)
		}
	}
}
