package controlplane

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
)

// How a lab with a control plane keeps its topology and the API server in step.
// svclab plays the kubelet: the pods it builds are written as Pods with their
// status, and a change to a pod is written the same way. Services go through the
// API server first, which allocates their ClusterIPs and node ports; the
// topology then takes the Services as the server holds them. A change made with
// kubectl reaches the lab through the watch: the topology takes the new Services
// and the proxies follow. The EndpointSlice controller makes the endpoints; a
// sync waits until its slices say what the topology computes they must (the two
// disagreeing is a finding, and the wait's error shows both).

// apiOwned are Services the API server keeps itself; the topology does not mirror
// them (the `kubernetes` Service's endpoint is the API server, no lab pod).
var apiOwned = map[string]bool{"default/kubernetes": true}

// consistentWithin bounds how long the controller may take to make the slices a
// change calls for; it takes milliseconds.
const consistentWithin = 60 * time.Second

// ApplyService creates svc, or updates the Service of its name as `kubectl
// apply` would: the fields the API server allocated and svc leaves out are kept.
func (c *ControlPlane) ApplyService(ctx context.Context, svc corev1.Service) error {
	s := svc.DeepCopy()
	if s.Namespace == "" {
		s.Namespace = metav1.NamespaceDefault
	}
	var cur corev1.Service
	err := c.client.Get(ctx, cluster.Services, s.Namespace, s.Name, &cur)
	if apierrors.IsNotFound(err) {
		return c.client.Create(ctx, cluster.Services, s)
	}
	if err != nil {
		return err
	}
	s.ResourceVersion = cur.ResourceVersion
	if s.Spec.ClusterIP == "" {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = cur.Spec.ClusterIP, cur.Spec.ClusterIPs
	}
	for i := range s.Spec.Ports {
		for _, cp := range cur.Spec.Ports {
			if s.Spec.Ports[i].NodePort == 0 && cp.Port == s.Spec.Ports[i].Port && cp.Protocol == s.Spec.Ports[i].Protocol {
				s.Spec.Ports[i].NodePort = cp.NodePort
			}
		}
	}
	if s.Spec.HealthCheckNodePort == 0 {
		s.Spec.HealthCheckNodePort = cur.Spec.HealthCheckNodePort
	}
	return c.client.Update(ctx, cluster.Services, s)
}

// mirrorServices makes the topology's Services the ones the API server holds
// (those the lab can model; the others are said once in the log and left to the
// proxies alone).
func (c *ControlPlane) mirrorServices(svcs []corev1.Service) error {
	var mine []corev1.Service
	for _, s := range svcs {
		if !apiOwned[s.Namespace+"/"+s.Name] {
			mine = append(mine, s)
		}
	}
	err := c.host.UpdateTopology(func(next *topology.Topology) error { return next.SetServices(mine) })
	if err != nil {
		return fmt.Errorf("the API server's Services: %w", err)
	}
	return nil
}

// ListServices lists the Services as the API server holds them now (not as the
// watch last saw them).
func (c *ControlPlane) ListServices(ctx context.Context) ([]corev1.Service, error) {
	ptrs, err := cluster.List[*corev1.Service](ctx, c.client, cluster.Services)
	if err != nil {
		return nil, err
	}
	out := make([]corev1.Service, len(ptrs))
	for i, p := range ptrs {
		out[i] = *p
	}
	return out, nil
}

// State waits until the watch's Services and EndpointSlices say what the
// topology computes, and returns them as the proxies' state.
func (c *ControlPlane) State(ctx context.Context) (*proxy.State, error) {
	t := c.host.Snapshot()
	want := proxy.FromObjects(t.Services, t.EndpointSlices())
	ctx, cancel := context.WithTimeout(ctx, consistentWithin)
	defer cancel()
	for {
		svcs, err := c.watch.Services()
		if err != nil {
			return nil, err
		}
		eps, err := c.watch.EndpointSlices()
		if err != nil {
			return nil, err
		}
		got := proxy.FromObjects(svcs, eps)
		diff := portsDiff(want, got)
		if diff == "" {
			return proxy.NewState(svcs, eps, nil), nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the API server's Services and EndpointSlices do not say what the topology computes after %s:\n%s", consistentWithin, diff)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// portsDiff compares the topology's ports with the API server's, leaving out the
// Services the API server keeps itself; "" when they agree.
func portsDiff(want, got []proxy.ServicePort) string {
	key := func(sp proxy.ServicePort) string {
		return sp.Name.NamespacedName() + ":" + sp.Name.Port + "/" + string(sp.Protocol)
	}
	gotBy := map[string]proxy.ServicePort{}
	for _, sp := range got {
		if !apiOwned[sp.Name.NamespacedName()] {
			gotBy[key(sp)] = sp
		}
	}
	var lines []string
	for _, w := range want {
		g, ok := gotBy[key(w)]
		delete(gotBy, key(w))
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("  %s: the API server has no such Service port", key(w)))
		case !samePort(w, g):
			lines = append(lines, fmt.Sprintf("  %s: topology %s, API server %s", key(w), describePort(w), describePort(g)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(gotBy)) {
		lines = append(lines, fmt.Sprintf("  %s: not in the topology", k))
	}
	return strings.Join(lines, "\n")
}

// samePort compares what a proxier reads of a Service port. Which pod an
// endpoint belongs to is left out: the controller's slices name it, the
// topology's computed ones may not.
func samePort(a, b proxy.ServicePort) bool {
	strip := func(sp proxy.ServicePort) proxy.ServicePort {
		sp.Endpoints = slices.Clone(sp.Endpoints)
		for i := range sp.Endpoints {
			sp.Endpoints[i].Pod = ""
		}
		return sp
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

func describePort(sp proxy.ServicePort) string {
	var eps []string
	for _, e := range sp.Endpoints {
		eps = append(eps, fmt.Sprintf("%s(ready=%v serving=%v terminating=%v node=%s)", e, e.Ready, e.Serving, e.Terminating, e.NodeName))
	}
	return fmt.Sprintf("%s:%d nodePort %d external IPs %v load balancer IPs %v source ranges %v endpoints [%s]",
		sp.ClusterIP, sp.Port, sp.NodePort, sp.ExternalIPs, sp.LoadBalancerIPs, sp.SourceRanges, strings.Join(eps, " "))
}

// publishIngress writes the ingress the topology gave each LoadBalancer Service
// into its status in the API server, as a cloud controller or MetalLB reports
// the address it assigned, and clears the status of a Service no longer of that
// type. svcs are the Services as the API server holds them.
func (c *ControlPlane) publishIngress(ctx context.Context, svcs []corev1.Service) error {
	t := c.host.Snapshot()
	for i := range svcs {
		cur := svcs[i].DeepCopy()
		want := corev1.LoadBalancerStatus{}
		if s, ok := t.Service(cur.Namespace, cur.Name); ok && s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			want = s.Status.LoadBalancer
		}
		if apiequality.Semantic.DeepEqual(cur.Status.LoadBalancer, want) {
			continue
		}
		cur.Status.LoadBalancer = *want.DeepCopy()
		if err := c.client.UpdateStatus(ctx, cluster.Services, cur); err != nil {
			return err
		}
	}
	return nil
}

// Follow keeps the lab in step with changes made to the API server by others
// (kubectl): on every change the watch sees, under changeMu (the lab's lock of
// changes), the topology takes the API server's Services as the watch saw them
// and syncProxies syncs the proxies. It returns at once; what it started ends when the
// watch stops (stopFollowing).
func (c *ControlPlane) Follow(changeMu *sync.Mutex, syncProxies func(context.Context) error) {
	c.following = make(chan struct{})
	ctx := c.watchCtx
	resync := func() error {
		changeMu.Lock()
		defer changeMu.Unlock()
		if err := c.TakeServices(ctx, c.watch.Services); err != nil {
			return err
		}
		return syncProxies(ctx)
	}
	go func() {
		defer close(c.following)
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.changed:
			}
			// Changes come in bursts (a Service, then its slices): take them together.
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := resync(); err != nil && ctx.Err() == nil {
				c.logf("lab %s: following the API server: %v", c.id, err)
			}
		}
	}()
}

// TakeServices makes the Services list returns the topology's and publishes
// the ingress the topology gives them; the caller holds changeMu, and syncs the
// proxies next.
func (c *ControlPlane) TakeServices(ctx context.Context, list func() ([]corev1.Service, error)) error {
	svcs, err := list()
	if err != nil {
		return err
	}
	if err := c.mirrorServices(svcs); err != nil {
		return err
	}
	return c.publishIngress(ctx, svcs)
}
