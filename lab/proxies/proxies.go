// Package proxies is what programs a lab's nodes: svclab's own proxier with
// its health check server on every node, or the real kube-proxy
// (kubeproxy.go), one process per node following the lab's API server.
package proxies

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/components"
	"github.com/svclab/svclab/lab/controlplane"
	"github.com/svclab/svclab/lab/internal/fanout"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
)

// Config is what a lab's proxies are made of.
type Config struct {
	// Host is the lab: its topology and members.
	Host Host
	Logf func(format string, args ...any)
	// Phase records a phase of the lab's start (lab/timings.go).
	Phase func(name string, began time.Time)
	// ID names the lab in messages; RunDir is its run directory.
	ID   string
	Mode proxy.Mode
	// Proxy is the configuration svclab's proxiers and kube-proxy run with.
	Proxy  proxy.Config
	RunDir string
	// Parallel bounds how many nodes are synced (or kube-proxies started) at
	// once.
	Parallel int
	// KubeProxy runs the real kube-proxy instead of svclab's proxiers; nil:
	// svclab's.
	KubeProxy *KubeProxyOptions
	// ControlPlane is the control plane the state comes from, and kube-proxy
	// follows; nil without one.
	ControlPlane *controlplane.ControlPlane
	Components   *components.Set
}

// Host is what the proxies need of their lab: a snapshot of its topology
// (never changed in place, read without a lock) and a copy of a member.
type Host interface {
	Snapshot() *topology.Topology
	Member(name string) (*member.Member, error)
}

// New is the proxies of c; nothing runs until Start (or StartKubeProxies).
func New(c Config) *Proxies {
	return &Proxies{c: c, proxiers: map[string]proxy.Proxier{}, health: map[string]*proxy.HealthServer{}}
}

// Proxies are what programs the lab's nodes: svclab's own proxier with its
// health check server on every node, or the real kube-proxy (kubeproxy.go).
type Proxies struct {
	c Config

	// started receives the outcome of starting the real kube-proxies, which
	// runs beside the rest of the control plane's start; starting is closed
	// when that is over, and cancelStart stops it.
	started     chan error
	starting    chan struct{}
	cancelStart context.CancelFunc

	// mu guards the fields below; it is taken inside the lab's mu (Down),
	// never around a call to the host.
	mu       sync.Mutex
	proxiers map[string]proxy.Proxier
	health   map[string]*proxy.HealthServer
	ports    []proxy.ServicePort
}

// Start makes a proxier for every node: svclab's own with its health check
// servers, or (started with the control plane, StartKubeProxies) the real
// kube-proxy. The lab syncs them next.
func (p *Proxies) Start() error {
	if p.c.KubeProxy != nil {
		return <-p.started
	}
	for _, n := range p.c.Host.Snapshot().Nodes {
		t, err := p.target(n)
		if err != nil {
			return err
		}
		px, err := p.c.Mode.New(t)
		if err != nil {
			return fmt.Errorf("node %s: %s proxier: %w", n.Name, p.c.Mode.Name, err)
		}
		p.mu.Lock()
		p.proxiers[n.Name] = px
		p.mu.Unlock()
		hs, err := proxy.NewHealthServer(t.NetNS, n.Name)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		p.mu.Lock()
		p.health[n.Name] = hs
		p.mu.Unlock()
	}
	return nil
}

func (p *Proxies) target(n topology.Node) (proxy.Target, error) {
	m, err := p.c.Host.Member(n.Name)
	if err != nil {
		return proxy.Target{}, err
	}
	return proxy.Target{
		Node:   proxy.Node{Name: n.Name, IP: n.IP, PodCIDR: n.PodCIDR},
		Config: p.c.Proxy,
		NetNS:  namespaces.Path(m.NetNS),
		RunDir: p.c.RunDir,
	}, nil
}

// Target is what a proxier of the node called node programs, for callers that drive
// a proxier of their own (benchmarks).
func (p *Proxies) Target(node string) (proxy.Target, error) {
	n, ok := p.c.Host.Snapshot().Node(node)
	if !ok {
		return proxy.Target{}, fmt.Errorf("lab %s has no node %q", p.c.ID, node)
	}
	return p.target(n)
}

// Sync programs every node with the state the proxies program now.
func (p *Proxies) Sync(ctx context.Context) error {
	state, err := p.state(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	names := make([]string, 0, len(p.proxiers))
	for name := range p.proxiers {
		names = append(names, name)
	}
	p.mu.Unlock()
	err = fanout.Each(ctx, p.c.Parallel, names, func(ctx context.Context, node string) error {
		p.mu.Lock()
		px, h := p.proxiers[node], p.health[node]
		p.mu.Unlock()
		if err := px.Sync(ctx, state); err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
		if h != nil {
			return h.Update(state.Ports)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ports = state.Ports
	p.mu.Unlock()
	return nil
}

// state is what the proxies program now.
func (p *Proxies) state(ctx context.Context) (*proxy.State, error) {
	if p.c.ControlPlane != nil {
		return p.c.ControlPlane.State(ctx)
	}
	t := p.c.Host.Snapshot()
	return proxy.NewState(t.Services, t.EndpointSlices(), nil), nil
}

// ServicePorts is the state last programmed into the nodes.
func (p *Proxies) ServicePorts() []proxy.ServicePort {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxy.ServicePort(nil), p.ports...)
}

// Close stops the health check servers and closes the proxiers.
func (p *Proxies) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.health {
		h.Close()
	}
	var errs []error
	for _, px := range p.proxiers {
		errs = append(errs, px.Close())
	}
	return errors.Join(errs...)
}
