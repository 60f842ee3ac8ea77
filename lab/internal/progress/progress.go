// Package progress keeps a long step visible: a status line every interval
// while it runs, also when the output is a log file (CI).
package progress

import "time"

// While runs step and, until it returns, calls status every interval with the
// time since step began. status prints a line each time, never a rewritten
// one, so a log file or CI output shows it as a terminal does.
func While(every time.Duration, status func(elapsed time.Duration), step func()) {
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		step()
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			status(time.Since(start))
		}
	}
}
