package lab

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
)

// change applies a mutation of the topology and re-programs the nodes. The
// topology is left as it was when the mutation fails.
func (l *Lab) change(ctx context.Context, mutate func(t *topology.Topology) error) error {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	if err := l.mutate(ctx, mutate); err != nil {
		return err
	}
	return l.Sync(ctx)
}

// mutate applies a mutation to the topology, leaving it as it was when the
// mutation fails, and with a control plane writes the pods that changed into the
// API server. The caller holds changeMu.
func (l *Lab) mutate(ctx context.Context, mutate func(t *topology.Topology) error) error {
	l.mu.Lock()
	before := l.topo
	next := l.topo.Clone()
	err := mutate(next)
	if err == nil {
		l.topo = next
	}
	l.mu.Unlock()
	if err != nil || l.cp == nil {
		return err
	}
	return l.kubelet.publishPods(ctx, before, next)
}

// changeServices checks a change of the Services against the topology, then,
// with a control plane, makes it in the API server (which allocates) and takes
// the Services as the server holds them; then it re-programs the nodes.
func (l *Lab) changeServices(ctx context.Context, mutate func(t *topology.Topology) error, inAPI func() error) error {
	if l.cp == nil {
		return l.change(ctx, mutate)
	}
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	l.mu.Lock()
	err := mutate(l.topo.Clone())
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if err := inAPI(); err != nil {
		return err
	}
	if err := l.cp.takeServices(ctx, func() ([]corev1.Service, error) { return l.cp.listServices(ctx) }); err != nil {
		return err
	}
	return l.Sync(ctx)
}

// UpdatePod changes a pod's labels, readiness or termination, as the kubelet and
// the API server would, then re-programs the nodes.
func (l *Lab) UpdatePod(ctx context.Context, key string, change func(p *topology.Pod)) error {
	return l.change(ctx, func(t *topology.Topology) error { return t.UpdatePod(key, change) })
}

// ApplyService adds or replaces a Service, as `kubectl apply` would.
func (l *Lab) ApplyService(ctx context.Context, svc corev1.Service) error {
	return l.changeServices(ctx, func(t *topology.Topology) error { return t.ApplyService(svc) },
		func() error { return l.cp.applyService(ctx, svc) })
}

// RemoveService deletes a Service.
func (l *Lab) RemoveService(ctx context.Context, namespace, name string) error {
	return l.changeServices(ctx, func(t *topology.Topology) error { return t.RemoveService(namespace, name) },
		func() error { return l.cp.client.Delete(ctx, cluster.Services, namespace, name, nil) })
}

// AddPod creates a pod: its namespace, its link to the node and its servers, then
// re-programs the nodes so Services that select it gain the endpoint.
func (l *Lab) AddPod(ctx context.Context, spec topology.PodSpec) (topology.Pod, error) {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	l.mu.Lock()
	next := l.topo.Clone()
	pod, err := next.AddPod(spec)
	if err != nil {
		l.mu.Unlock()
		return topology.Pod{}, err
	}
	m := l.addMember(pod.Name, member.KindPod, pod.IP, pod.Node)
	l.record.Members = l.memberRecords()
	err = record.Write(l.dir, l.record)
	l.mu.Unlock()
	if err == nil {
		err = namespaces.Create(m.NetNS)
	}
	if err == nil {
		err = l.buildPods(ctx, []topology.Pod{pod})
	}
	if err == nil && !l.opts.NoServers {
		err = l.startServers(ctx, []topology.Pod{pod})
	}
	if err == nil && l.cp != nil {
		err = l.kubelet.writePods(ctx, next, []topology.Pod{pod})
	}
	if err == nil {
		err = l.kubelet.writePodFiles([]topology.Pod{pod})
	}
	if err != nil {
		return topology.Pod{}, errors.Join(err, l.removePodNetwork(pod, false))
	}
	l.mu.Lock()
	l.topo = next
	l.mu.Unlock()
	return pod, l.Sync(ctx)
}

// DeletePod removes a pod from the Services first, as the endpoints controller does
// when a pod is deleted, then tears its sandbox down. Graceful closes the pod's
// connections first, as a server that handles SIGTERM does; otherwise the pod's
// network is cut while its connections are open, as when a node kills it outright,
// and peers of those connections hear nothing more.
func (l *Lab) DeletePod(ctx context.Context, key string, graceful bool) error {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	var pod topology.Pod
	err := l.mutate(ctx, func(t *topology.Topology) (err error) {
		pod, err = t.RemovePod(key)
		return err
	})
	if err != nil {
		return err
	}
	return errors.Join(l.Sync(ctx), l.removePodNetwork(pod, graceful))
}

func (l *Lab) removePodNetwork(pod topology.Pod, graceful bool) error {
	l.mu.Lock()
	m := l.members[pod.Name]
	srv := l.servers[pod.Name]
	delete(l.servers, pod.Name)
	node := l.members[pod.Node]
	l.mu.Unlock()
	if m == nil {
		return nil
	}
	if graceful && srv != nil {
		srv.Close()
	}
	var errs []error
	// Deleting the node end removes both ends at once: the pod is off the network
	// even while this process still holds its sockets.
	if h, err := openHandle(node.NetNS); err == nil {
		if link, err := h.Netlink.LinkByName(podVeth(pod.Key(), l.RunID)); err == nil {
			errs = append(errs, h.Netlink.LinkDel(link))
		}
		h.Close()
	}
	if srv != nil && !graceful {
		srv.Close()
	}
	errs = append(errs, namespaces.Delete(m.NetNS), l.kubelet.removePodFiles(pod.Name))
	l.mu.Lock()
	delete(l.members, pod.Name)
	l.record.Members = l.memberRecords()
	errs = append(errs, record.Write(l.dir, l.record))
	l.mu.Unlock()
	return errors.Join(errs...)
}

// startServers serves every declared port of each pod.
func (l *Lab) startServers(ctx context.Context, pods []topology.Pod) error {
	return forEach(ctx, l.parallel(), pods, func(_ context.Context, p topology.Pod) error {
		if len(p.Ports) == 0 || p.Component != "" {
			return nil // a component's pod runs the component (CoreDNS)
		}
		l.mu.Lock()
		m := l.members[p.Name]
		l.mu.Unlock()
		s, err := traffic.Serve(m.NetNS, traffic.Identity{Pod: p.Name, Namespace: p.Namespace, Node: p.Node, IP: p.IP}, p.Ports)
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.servers[p.Name] = s
		l.mu.Unlock()
		return nil
	})
}
