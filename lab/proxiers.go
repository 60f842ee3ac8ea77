package lab

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/internal/fanout"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
)

// proxies are what programs the lab's nodes: svclab's own proxier with its
// health check server on every node, or the real kube-proxy (kubeproxy.go).
type proxies struct {
	host host
	logf func(format string, args ...any)
	// phase records a phase of the lab's start (timings.go).
	phase  func(name string, began time.Time)
	id     string
	mode   proxy.Mode
	config proxy.Config
	runDir string
	// parallel bounds how many nodes are synced (or kube-proxies started) at
	// once.
	parallel int
	// kubeProxy runs the real kube-proxy instead of svclab's proxiers; nil:
	// svclab's.
	kubeProxy *KubeProxyOptions
	// cp is the control plane the state comes from, and kube-proxy follows;
	// nil without one.
	cp    *controlPlane
	comps *components

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

// start makes a proxier for every node: svclab's own with its health check
// servers, or (started with the control plane, startKubeProxies) the real
// kube-proxy. The lab syncs them next.
func (p *proxies) start() error {
	if p.kubeProxy != nil {
		return <-p.started
	}
	for _, n := range p.host.snapshot().Nodes {
		t, err := p.target(n)
		if err != nil {
			return err
		}
		px, err := p.mode.New(t)
		if err != nil {
			return fmt.Errorf("node %s: %s proxier: %w", n.Name, p.mode.Name, err)
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

func (p *proxies) target(n topology.Node) (proxy.Target, error) {
	m, err := p.host.Member(n.Name)
	if err != nil {
		return proxy.Target{}, err
	}
	return proxy.Target{
		Node:   proxy.Node{Name: n.Name, IP: n.IP, PodCIDR: n.PodCIDR},
		Config: p.config,
		NetNS:  namespaces.Path(m.NetNS),
		RunDir: p.runDir,
	}, nil
}

// Target is what a proxier of the node called node programs, for callers that drive
// a proxier of their own (benchmarks).
func (l *Lab) Target(node string) (proxy.Target, error) {
	n, ok := l.snapshot().Node(node)
	if !ok {
		return proxy.Target{}, fmt.Errorf("lab %s has no node %q", l.ID, node)
	}
	return l.proxies.target(n)
}

// Sync programs every node with the Services and their endpoints, as kube-proxy
// on each node does after a change: computed from the topology, or with a control
// plane, as the API server holds them once its controller has made the
// endpoints the topology calls for. With the real kube-proxy, it waits until
// every node's dataplane says what kube-proxy must have programmed. Then it
// routes the load balancers to what the nodes now serve.
func (l *Lab) Sync(ctx context.Context) error {
	if l.mode.Name == "" {
		return nil
	}
	if err := l.proxies.sync(ctx); err != nil {
		return err
	}
	return l.lbs.sync(ctx, l.Topology())
}

// sync programs every node with the state the proxies program now.
func (p *proxies) sync(ctx context.Context) error {
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
	err = fanout.Each(ctx, p.parallel, names, func(ctx context.Context, node string) error {
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
func (p *proxies) state(ctx context.Context) (*proxy.State, error) {
	if p.cp != nil {
		return p.cp.state(ctx)
	}
	t := p.host.snapshot()
	return proxy.NewState(t.Services, t.EndpointSlices(), nil), nil
}

// servicePorts is the state last programmed into the nodes.
func (p *proxies) servicePorts() []proxy.ServicePort {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxy.ServicePort(nil), p.ports...)
}

// close stops the health check servers and closes the proxiers.
func (p *proxies) close() error {
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
