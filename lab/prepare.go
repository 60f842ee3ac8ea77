package lab

import (
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
)

// Prepare is the topology a lab of t under o is built from (a copy of t, with
// its control plane when o asks for one), the mode it runs and the proxy
// configuration, validated as a run validates them. Up builds from it, and
// what only plans (verify --plan, rules) starts from it too, so that a plan
// refuses exactly what a run refuses. It does not ask the kernel whether the
// mode can run here: a plan needs no kernel.
func Prepare(t *topology.Topology, o Options) (*topology.Topology, proxy.Mode, proxy.Config, error) {
	t = t.Clone()
	if o.ControlPlane || o.KubeProxy != nil {
		if err := t.EnableControlPlane(); err != nil {
			return nil, proxy.Mode{}, proxy.Config{}, err
		}
	}
	var m proxy.Mode
	if o.Mode != "" {
		var err error
		if m, err = proxy.Lookup(o.Mode); err != nil {
			return nil, proxy.Mode{}, proxy.Config{}, err
		}
		if o.KubeProxy == nil {
			if err := m.HasProxier(); err != nil {
				return nil, proxy.Mode{}, proxy.Config{}, err
			}
		}
	}
	c, err := ConfigOf(t, o)
	if err != nil {
		return nil, proxy.Mode{}, proxy.Config{}, err
	}
	if o.KubeProxy == nil {
		// svclab's proxiers refuse what they do not reproduce; the real
		// kube-proxy takes its whole configuration.
		if err := c.Validate(m.Section); err != nil {
			return nil, proxy.Mode{}, proxy.Config{}, err
		}
	}
	return t, m, c, nil
}
