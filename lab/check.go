package lab

import (
	"fmt"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// Check refuses what Up refuses of t and o for their own sake, before and while
// it programs the nodes: the mode, the configuration svclab's proxiers would
// refuse (backend, scheduler, release, fields they do not reproduce), the backend
// the real kube-proxy would be given. It needs no root and leaves the kernel
// alone (whether this kernel can run the mode is Up's to find out), so a plan
// (verify --plan) refuses exactly what a run would.
func Check(t *topology.Topology, o Options) error {
	t, m, c, err := Prepare(t, o)
	if err != nil || o.Mode == "" {
		return err
	}
	if o.KubeProxy != nil {
		if c.Backend == "" {
			return nil
		}
		_, err := xtables.BackendFor(c.Backend)
		return err
	}
	if m.Render == nil || len(t.Nodes) == 0 {
		return nil
	}
	// The mode's proxier checks its settings as its Render does: rendering one
	// node asks them as a run's first sync would.
	n := t.Nodes[0]
	state := proxy.NewState(t.Services, t.EndpointSlices(), nil)
	if _, err := m.Render(proxy.Target{Node: proxy.Node{Name: n.Name, IP: n.IP, PodCIDR: n.PodCIDR}, Config: c}, state); err != nil {
		return fmt.Errorf("mode %s: %w", m.Name, err)
	}
	return nil
}

// Describe is the record a lab of t with o would write once up: its members with
// their addresses and the Services' ports as the topology gives them (with a
// control plane, the API server may allocate what the file leaves out). It
// builds nothing and needs no root.
func Describe(t *topology.Topology, o Options) (record.Lab, error) {
	l, err := newLab(t, o)
	if err != nil {
		return record.Lab{}, err
	}
	state := proxy.NewState(l.topo.Services, l.topo.EndpointSlices(), nil)
	r := l.ledger.record()
	r.Services = ServiceRecords(state.Ports)
	return r, nil
}
