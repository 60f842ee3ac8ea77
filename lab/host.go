package lab

import (
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/topology"
)

// host is the lab as its parts see it (controlplane.Host, kubelet.Host,
// proxies.Host): a snapshot of the topology, a change of a copy made the
// lab's under its lock (mu), which the lab alone takes, and a member. The
// parts hold this, not the Lab, so that what they read and change of the
// lab's state is said here.
type host struct{ l *Lab }

// Snapshot is the lab's topology now. The lab replaces its topology whole
// and never changes one in place, so a snapshot may be read without a lock;
// it must not be changed.
func (h host) Snapshot() *topology.Topology {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	return h.l.topo
}

// UpdateTopology makes fn's change of a copy of the topology the lab's; when
// fn fails, the topology stays as it was.
func (h host) UpdateTopology(fn func(t *topology.Topology) error) error {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	next := h.l.topo.Clone()
	if err := fn(next); err != nil {
		return err
	}
	h.l.topo = next
	return nil
}

// Member returns a copy of the member called name.
func (h host) Member(name string) (*member.Member, error) { return h.l.ledger.Member(name) }
