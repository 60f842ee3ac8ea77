package lab

import (
	"time"

	"github.com/svclab/svclab/lab/record"
)

// componentDied is told of every component that ended without the lab
// stopping it: the owner's log says so with its status, and the record shows
// it to `svclab ls` as the lab's health.
func (l *Lab) componentDied(d record.Death) {
	l.logf("lab %s: %s (pid %d) exited %s; its log: %s", l.ID, d.Component, d.PID, d.Status, d.Log)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return
	}
	l.record.Deaths = append(l.record.Deaths, d)
	if err := record.Write(l.dir, l.record); err != nil {
		l.logf("lab %s: record the death of %s: %v", l.ID, d.Component, err)
	}
}

// Deaths lists the components of the lab that ended without the lab stopping
// them (killed, crashed), seen at or after since.
func (l *Lab) Deaths(since time.Time) []record.Death { return l.supervisor.Deaths(since) }
