package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/clusterdns"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// Up builds the lab described by t and returns it running. On any error, on ctx's
// cancellation and on panic it removes everything it created before returning:
// Down, the one place that undoes a start, whatever step it reached.
func Up(ctx context.Context, t *topology.Topology, o Options) (l *Lab, err error) {
	if err := namespaces.CheckPrivileges(); err != nil {
		return nil, err
	}
	l, err = newLab(t, o)
	if err != nil {
		return nil, err
	}
	if o.Mode != "" {
		if err := l.mode.Available(); err != nil {
			return nil, fmt.Errorf("mode %s: %w", l.mode.Name, err)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			l.Down()
			panic(p)
		}
		if err != nil {
			err = errors.Join(err, l.Down())
			l = nil
		}
	}()
	for _, step := range upSteps {
		if err := step(ctx, l); err != nil {
			return l, err
		}
	}
	return l, nil
}

// upSteps are Up's steps, in order. Each is a no-op where the lab has no such
// part (no control plane, no mode, no servers).
var upSteps = []func(context.Context, *Lab) error{
	openRun,
	buildNetwork,
	startCluster,
	programNodes,
	startBalancers,
	startServers,
	finishUp,
}

// openRun writes the lab's record before anything is created, so that
// `svclab clean` finds whatever follows, makes its run directory and answers
// `ls` and `inspect` on its socket.
func openRun(_ context.Context, l *Lab) error {
	if err := l.ledger.write(); err != nil {
		return err
	}
	if err := os.MkdirAll(record.RunDir(l.dir, l.ID), 0o755); err != nil {
		return fmt.Errorf("lab %s: %w", l.ID, err)
	}
	if err := l.ledger.serve(); err != nil {
		return err
	}
	if l.cp != nil {
		// Checked before anything is built: etcd would fail part-way, with a
		// message about its WAL that does not say why.
		if err := checkRunSpace(l.dir, controlPlaneSpace); err != nil {
			return fmt.Errorf("lab %s: %w", l.ID, err)
		}
	}
	return nil
}

// buildNetwork creates every namespace, link and route, the routes to the
// load balancers' addresses included.
func buildNetwork(ctx context.Context, l *Lab) error {
	start := time.Now()
	if err := l.net.Build(ctx, l.topo); err != nil {
		return err
	}
	if err := l.lbs.Route(l.Topology()); err != nil {
		return err
	}
	l.timings.add(phaseBuild, start)
	t := l.asked
	l.logf("lab %s: %d nodes, %d pods, %d clients up in %s", l.ID, len(t.Nodes), len(t.Pods), len(t.Clients), time.Since(start).Round(time.Millisecond))
	return nil
}

// startCluster starts the control plane and what runs beside it (the
// controller manager, CoreDNS, the kube-proxies): clusterstart.go.
func startCluster(ctx context.Context, l *Lab) error {
	if l.cp == nil {
		return nil
	}
	if l.dns != nil {
		// A kubelet reports a CoreDNS pod not ready until its readiness
		// probe passes: so does the topology before it reaches the API server.
		if err := l.host.UpdateTopology(clusterdns.MarkStarting); err != nil {
			return err
		}
	}
	kp := l.opts.KubeProxy
	return clusterStart{
		cp: l.cp, dns: l.dns, proxies: l.proxies, kubelet: l.kubelet, timings: l.timings,
		kubeProxy: kp != nil, ownKubeProxy: kp != nil && kp.Binary != "",
		topology: l.Topology,
		change: func(ctx context.Context, mutate func(*topology.Topology) error) error {
			return l.change(ctx, mutate, nil)
		},
	}.run(ctx)
}

// programNodes starts the proxies and programs every node once.
func programNodes(ctx context.Context, l *Lab) error {
	if l.cp != nil {
		// The state the nodes must be programmed with is in the API server:
		// the kube-proxies forked early may run.
		if err := l.cp.OpenProxyGate(); err != nil {
			return err
		}
	}
	if l.mode.Name == "" {
		return nil
	}
	began := time.Now()
	if err := l.proxies.Start(); err != nil {
		return err
	}
	began2 := time.Now()
	if err := l.Sync(ctx); err != nil {
		return err
	}
	l.timings.add(phaseProxiesStarted, began)
	l.timings.add(phaseProgrammed, began2)
	return nil
}

func startBalancers(_ context.Context, l *Lab) error {
	return l.lbs.Start(l.Topology())
}

// startServers serves every pod's ports and the nodes' host-network ones,
// unless the options say not to.
func startServers(ctx context.Context, l *Lab) error {
	if l.opts.NoServers {
		return nil
	}
	began := time.Now()
	t := l.host.Snapshot()
	if err := l.pods.Serve(ctx, t.Pods); err != nil {
		return err
	}
	if err := l.pods.ServeNodes(ctx, t.Nodes, t.EndpointSlices()); err != nil {
		return err
	}
	l.timings.add(phaseServers, began)
	return nil
}

// finishUp writes the pods' files and the record of the Services, follows the
// API server, starts CoreDNS's readiness probes, and records the start's
// phases, once the lab is found whole.
func finishUp(_ context.Context, l *Lab) error {
	if err := l.kubelet.WritePodFiles(l.host.Snapshot().Pods); err != nil {
		return err
	}
	// The Services the lab came up with, for `svclab inspect`.
	ports := l.proxies.ServicePorts()
	if err := l.ledger.Update(func(r *record.Lab) { r.Services = ServiceRecords(ports) }); err != nil {
		return err
	}
	if l.cp != nil && l.mode.Name != "" {
		l.cp.Follow(&l.changeMu, l.Sync)
	}
	l.dns.StartProbes()
	// Up reports a lab whole or not at all: a namespace that vanished while
	// the lab came up (removed from outside) fails it.
	if err := checkWhole(l.ID, l.Members()); err != nil {
		return err
	}
	l.timings.add(phaseUp, l.timings.start)
	// The start's phases go into the record, where up --timings and ls --json
	// read them; later syncs are the lab's changes, not its start.
	phases := l.timings.finish()
	return l.ledger.Update(func(r *record.Lab) { r.Timings = phases })
}

// checkWhole fails, naming them, when any of the namespaces of lab id's
// members is gone.
func checkWhole(id string, members []record.Member) error {
	var gone []string
	for _, m := range members {
		if !namespaces.Mounted(m.NetNS) {
			gone = append(gone, m.NetNS)
		}
	}
	if len(gone) > 0 {
		return fmt.Errorf("lab %s is not whole: %d of its %d namespaces vanished while it came up (%s); something removed them from outside",
			id, len(gone), len(members), strings.Join(gone, ", "))
	}
	return nil
}
