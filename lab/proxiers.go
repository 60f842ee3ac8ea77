package lab

import (
	"context"
	"fmt"

	"github.com/svclab/svclab/lab/internal/fanout"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// startProxiers makes a proxier for every node and programs the initial state:
// svclab's own with its health check servers, or the real kube-proxy.
func (l *Lab) startProxiers(ctx context.Context) error {
	if l.opts.KubeProxy != nil {
		// Started with the control plane (startControlPlane).
		if err := <-l.cp.proxiesStarted; err != nil {
			return err
		}
		return l.Sync(ctx)
	}
	for _, n := range l.topo.Nodes {
		t := l.target(n)
		p, err := l.mode.New(t)
		if err != nil {
			return fmt.Errorf("node %s: %s proxier: %w", n.Name, l.mode.Name, err)
		}
		l.proxiers[n.Name] = p
		hs, err := proxy.NewHealthServer(t.NetNS, n.Name)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		l.health[n.Name] = hs
	}
	return l.Sync(ctx)
}

func (l *Lab) target(n topology.Node) proxy.Target {
	return proxy.Target{
		Node:   proxy.Node{Name: n.Name, IP: n.IP, PodCIDR: n.PodCIDR},
		Config: l.config,
		NetNS:  namespaces.Path(l.ledger.netns(n.Name)),
		RunDir: record.RunDir(l.dir, l.ID),
	}
}

// Target is what a proxier of the node called node programs, for callers that drive
// a proxier of their own (benchmarks).
func (l *Lab) Target(node string) (proxy.Target, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.topo.Node(node)
	if !ok {
		return proxy.Target{}, fmt.Errorf("lab %s has no node %q", l.ID, node)
	}
	return l.target(n), nil
}

// Sync programs every node with the Services and their endpoints, as kube-proxy
// on each node does after a change: computed from the topology, or with a control
// plane, as the API server holds them once its controller has made the
// endpoints the topology calls for. With the real kube-proxy, it waits until
// every node's dataplane says what kube-proxy must have programmed.
func (l *Lab) Sync(ctx context.Context) error {
	if l.mode.Name == "" {
		return nil
	}
	state, err := l.state(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(l.proxiers))
	for name := range l.proxiers {
		names = append(names, name)
	}
	err = fanout.Each(ctx, l.parallel, names, func(ctx context.Context, node string) error {
		if err := l.proxiers[node].Sync(ctx, state); err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
		if h := l.health[node]; h != nil {
			return h.Update(state.Ports)
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.ports = state.Ports
	l.mu.Unlock()
	return l.lbs.sync(ctx, l.Topology())
}

// state is what the proxies program now.
func (l *Lab) state(ctx context.Context) (*proxy.State, error) {
	if l.cp != nil {
		return l.apiState(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return proxy.NewState(l.topo.Services, l.topo.EndpointSlices(), nil), nil
}
