package lab

import (
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// host is what a part of a lab (its control plane, its kubelet's role, its
// proxies) needs of the lab's topology and members. The parts hold this, not
// the Lab, so that what they read and change of the lab's state is said here
// and done under the lab's lock (mu), which the lab alone takes. The record is
// the ledger's (recorder), and the log a function.
type host interface {
	// snapshot is the lab's topology now. The lab replaces its topology
	// whole and never changes one in place, so a snapshot may be read without
	// a lock; it must not be changed.
	snapshot() *topology.Topology
	// updateTopology makes fn's change of a copy of the topology the lab's;
	// when fn fails, the topology stays as it was.
	updateTopology(fn func(t *topology.Topology) error) error
	// Member returns a copy of the member called name.
	Member(name string) (*member.Member, error)
}

// recorder keeps the lab's record (the ledger).
type recorder interface {
	// update changes the record with change and writes it.
	update(change func(r *record.Lab)) error
}

func (l *Lab) snapshot() *topology.Topology {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.topo
}

func (l *Lab) updateTopology(fn func(t *topology.Topology) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.topo.Clone()
	if err := fn(next); err != nil {
		return err
	}
	l.topo = next
	return nil
}
