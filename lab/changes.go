package lab

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/topology"
)

// change applies a mutation of the topology, with a control plane writes the
// pods that changed into the API server, and re-programs the nodes. Then, under
// changeMu, it runs after when there is one (whatever the sync's outcome),
// joining its error to the sync's.
//
// The topology takes the change only once the API server has it: when the
// mutation or the write fails (a conflict, a request timed out on a loaded
// machine), the topology is left as it was, so that the lab never believes in
// a state the API server (and so kube-proxy) does not have, and the caller's
// retry finds the same difference to write again.
func (l *Lab) change(ctx context.Context, mutate func(t *topology.Topology) error, after func() error) error {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	l.mu.Lock()
	before := l.topo
	next := l.topo.Clone()
	err := mutate(next)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if l.cp != nil {
		if err := l.kubelet.PublishPods(ctx, before, next); err != nil {
			return err
		}
	}
	// changeMu held since before was read: no other change came between.
	l.mu.Lock()
	l.topo = next
	l.mu.Unlock()
	err = l.Sync(ctx)
	if after != nil {
		err = errors.Join(err, after())
	}
	return err
}

// changeServices checks a change of the Services against the topology, then,
// with a control plane, makes it in the API server (which allocates) and takes
// the Services as the server holds them; then it re-programs the nodes.
func (l *Lab) changeServices(ctx context.Context, mutate func(t *topology.Topology) error, inAPI func() error) error {
	if l.cp == nil {
		return l.change(ctx, mutate, nil)
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
	if err := l.cp.TakeServices(ctx, func() ([]corev1.Service, error) { return l.cp.ListServices(ctx) }); err != nil {
		return err
	}
	return l.Sync(ctx)
}

// UpdatePod changes a pod's labels, readiness or termination, as the kubelet and
// the API server would, then re-programs the nodes.
func (l *Lab) UpdatePod(ctx context.Context, key string, change func(p *topology.Pod)) error {
	return l.change(ctx, func(t *topology.Topology) error { return t.UpdatePod(key, change) }, nil)
}

// ApplyService adds or replaces a Service, as `kubectl apply` would.
func (l *Lab) ApplyService(ctx context.Context, svc corev1.Service) error {
	return l.changeServices(ctx, func(t *topology.Topology) error { return t.ApplyService(svc) },
		func() error { return l.cp.ApplyService(ctx, svc) })
}

// RemoveService deletes a Service.
func (l *Lab) RemoveService(ctx context.Context, namespace, name string) error {
	return l.changeServices(ctx, func(t *topology.Topology) error { return t.RemoveService(namespace, name) },
		func() error { return l.cp.DeleteService(ctx, namespace, name) })
}

// AddPod creates a pod: its namespace, its link to the node and its servers, then
// re-programs the nodes so Services that select it gain the endpoint.
func (l *Lab) AddPod(ctx context.Context, spec topology.PodSpec) (topology.Pod, error) {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	l.mu.Lock()
	next := l.topo.Clone()
	l.mu.Unlock()
	pod, err := next.AddPod(spec)
	if err != nil {
		return topology.Pod{}, err
	}
	_, err = l.ledger.Add(pod.Name, member.KindPod, pod.IP, pod.Node)
	if err == nil {
		err = l.net.AddPod(ctx, next, pod)
	}
	if err == nil && !l.opts.NoServers {
		err = l.pods.Serve(ctx, []topology.Pod{pod})
	}
	if err == nil && l.cp != nil {
		err = l.kubelet.WritePods(ctx, next, []topology.Pod{pod})
	}
	if err == nil {
		err = l.kubelet.WritePodFiles([]topology.Pod{pod})
	}
	if err != nil {
		return topology.Pod{}, errors.Join(err, l.pods.Remove(pod, false), l.kubelet.RemovePodFiles(pod.Name))
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
	var pod topology.Pod
	return l.change(ctx, func(t *topology.Topology) (err error) {
		pod, err = t.RemovePod(key)
		return err
	}, func() error {
		return errors.Join(l.pods.Remove(pod, graceful), l.kubelet.RemovePodFiles(pod.Name))
	})
}
