package kube

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// lineWriter hands every write on to a channel, as one progress line each.
type lineWriter struct {
	mu    sync.Mutex
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines <- string(p)
	return len(p), nil
}

// TestWhileReportingHeartbeats: a step slower than the interval gets a status
// line each interval, each a whole line of its own (no carriage return: a log file
// shows it as a terminal does), with a growing elapsed time. The step ends only
// once it saw three heartbeats, so the test waits for them rather than guessing a
// duration.
func TestWhileReportingHeartbeats(t *testing.T) {
	w := &lineWriter{lines: make(chan string, 100)}
	var seen []string
	var elapsed []time.Duration
	whileReporting(logger{w}, 10*time.Millisecond, func(d time.Duration) string {
		elapsed = append(elapsed, d)
		return "still building: " + d.String()
	}, func() {
		deadline := time.After(30 * time.Second)
		for len(seen) < 3 {
			select {
			case l := <-w.lines:
				seen = append(seen, l)
			case <-deadline:
				t.Errorf("30 s into a slow step, %d heartbeats: %q", len(seen), seen)
				return
			}
		}
	})
	for _, l := range seen {
		if !strings.HasPrefix(l, "kube: still building: ") || !strings.HasSuffix(l, "\n") || strings.Count(l, "\n") != 1 || strings.Contains(l, "\r") {
			t.Errorf("heartbeat %q: want one line \"kube: still building: ...\\n\"", l)
		}
	}
	for i := 1; i < len(elapsed); i++ {
		if elapsed[i] <= elapsed[i-1] {
			t.Errorf("elapsed times %v do not grow", elapsed)
		}
	}
}
