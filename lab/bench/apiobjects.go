package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxy"
)

// sliceManager marks the EndpointSlices the bench writes itself, for
// selectorless Services, so that no controller of the API server's takes them
// for its own.
const sliceManager = "svclab-bench"

// apiWriter writes the bench's synthetic state into a lab's API server, where
// the real kube-proxy reads it: each ServicePort as a selectorless Service and
// its EndpointSlices, one per port of its endpoints (a slice has one port
// list for all of its endpoints). It remembers what it wrote, so that an
// update writes only what changed.
type apiWriter struct {
	c *cluster.Client
	// slices holds the slices written, by Service name, as the API server
	// returned them (their resource versions, for updates).
	slices map[string][]*discoveryv1.EndpointSlice
	mu     sync.Mutex
	// parallel bounds the requests under way when many objects are written.
	parallel int
	// written counts the objects created, replaced or deleted, for the load
	// rate the bench reports.
	written atomic.Int64
}

// apiWriters is how many requests a writer keeps under way. BenchmarkAPILoad
// on a 2-core machine (500 Services and their slices written and deleted,
// protobuf): 540-580 objects/s with 8, 680-790 with 32, 835-880 with 96; at
// 10,000 Services about 300 objects created a second with 32 (JSON alike),
// the API server with its etcd using 1.2 to 1.6 cores and the controller
// manager most of the rest (docs/benchmarks.md): the API server, not the
// client, is the bound.
const apiWriters = 32

func newAPIWriter(ctx context.Context, c *cluster.Client) (*apiWriter, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serviceNamespace}}
	if err := c.Ensure(ctx, cluster.Namespaces, ns); err != nil {
		return nil, err
	}
	return &apiWriter{c: c, slices: map[string][]*discoveryv1.EndpointSlice{}, parallel: apiWriters}, nil
}

// move makes the API server hold to instead of from (both as written by this
// writer): Services that are new are created with their slices, Services that
// went are deleted with theirs, and slices whose endpoints changed are
// replaced. A non-zero trigger stamps every slice written with
// endpoints.kubernetes.io/last-change-trigger-time, from which kube-proxy
// times the network programming latency of the change.
func (w *apiWriter) move(ctx context.Context, from, to []proxy.ServicePort, trigger time.Time) error {
	old := map[string]proxy.ServicePort{}
	for _, sp := range from {
		old[sp.Name.Name] = sp
	}
	var work []func(context.Context) error
	for _, sp := range to {
		prev, existed := old[sp.Name.Name]
		delete(old, sp.Name.Name)
		switch {
		case !existed:
			work = append(work, func(ctx context.Context) error { return w.create(ctx, sp, trigger) })
		case !slices.Equal(prev.Endpoints, sp.Endpoints):
			work = append(work, func(ctx context.Context) error { return w.replaceSlices(ctx, sp, trigger) })
		}
	}
	for _, sp := range old {
		work = append(work, func(ctx context.Context) error { return w.remove(ctx, sp) })
	}
	return w.run(ctx, work)
}

// run runs the writes, parallel at most at a time; the first error stops the
// ones not yet started.
func (w *apiWriter) run(ctx context.Context, work []func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, w.parallel)
	var wg sync.WaitGroup
	for _, f := range work {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

func (w *apiWriter) create(ctx context.Context, sp proxy.ServicePort, trigger time.Time) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: sp.Name.Name, Namespace: serviceNamespace},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: sp.ClusterIP.String(),
			Ports: []corev1.ServicePort{{
				Name: sp.Name.Port, Protocol: sp.Protocol, Port: int32(sp.Port),
				TargetPort: intstr.FromInt32(openPortBase),
			}},
		},
	}
	if err := w.c.Create(ctx, cluster.Services, svc); err != nil {
		return err
	}
	w.written.Add(1)
	var made []*discoveryv1.EndpointSlice
	for _, s := range endpointSlices(sp, trigger) {
		if err := w.c.Create(ctx, cluster.EndpointSlices, s); err != nil {
			return err
		}
		w.written.Add(1)
		made = append(made, s)
	}
	w.set(sp.Name.Name, made)
	return nil
}

// replaceSlices writes sp's slices over the ones written before, which have
// the same names when the number of ports is the same (the bench's updates
// change ports, never how many there are).
func (w *apiWriter) replaceSlices(ctx context.Context, sp proxy.ServicePort, trigger time.Time) error {
	old := w.get(sp.Name.Name)
	next := endpointSlices(sp, trigger)
	if len(old) != len(next) {
		return fmt.Errorf("service %s/%s: %d EndpointSlices to replace %d", serviceNamespace, sp.Name.Name, len(next), len(old))
	}
	for i, s := range next {
		s.ResourceVersion = old[i].ResourceVersion
		if err := w.c.Update(ctx, cluster.EndpointSlices, s); err != nil {
			return err
		}
		w.written.Add(1)
	}
	w.set(sp.Name.Name, next)
	return nil
}

func (w *apiWriter) remove(ctx context.Context, sp proxy.ServicePort) error {
	for _, s := range w.get(sp.Name.Name) {
		if err := w.c.Delete(ctx, cluster.EndpointSlices, serviceNamespace, s.Name, nil); err != nil {
			return err
		}
		w.written.Add(1)
	}
	w.set(sp.Name.Name, nil)
	if err := w.c.Delete(ctx, cluster.Services, serviceNamespace, sp.Name.Name, nil); err != nil {
		return err
	}
	w.written.Add(1)
	return nil
}

func (w *apiWriter) get(name string) []*discoveryv1.EndpointSlice {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slices[name]
}

func (w *apiWriter) set(name string, s []*discoveryv1.EndpointSlice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s == nil {
		delete(w.slices, name)
		return
	}
	w.slices[name] = s
}

// endpointSlices are sp's endpoints as EndpointSlices: one per target port, in
// the order the ports first appear, named after the Service and the slice's
// place in that order (so the k-th slice keeps its name when its port
// changes).
func endpointSlices(sp proxy.ServicePort, trigger time.Time) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	byPort := map[int]*discoveryv1.EndpointSlice{}
	for _, ep := range sp.Endpoints {
		s, ok := byPort[ep.Port]
		if !ok {
			s = &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("%s-%d", sp.Name.Name, len(out)), Namespace: serviceNamespace,
					Labels: map[string]string{
						discoveryv1.LabelServiceName: sp.Name.Name,
						discoveryv1.LabelManagedBy:   sliceManager,
					},
				},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports: []discoveryv1.EndpointPort{{
					Name: ptr(sp.Name.Port), Protocol: ptr(sp.Protocol), Port: ptr(int32(ep.Port)),
				}},
			}
			if !trigger.IsZero() {
				s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger.UTC().Format(time.RFC3339Nano)}
			}
			byPort[ep.Port] = s
			out = append(out, s)
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{ep.IP.String()},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr(ep.Ready), Serving: ptr(ep.Serving), Terminating: ptr(ep.Terminating),
			},
			NodeName: ptr(ep.NodeName),
		})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
