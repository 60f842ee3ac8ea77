package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Watch keeps the Services and EndpointSlices of the cluster, as kube-proxy's
// informers do, and tells of every change.
type Watch struct {
	services, slices cache.SharedIndexInformer
}

// Watch starts watching; changed is called (from the informers' goroutines,
// so it must not block) after every change once both lists have synced. The
// watch ends with ctx.
func (c *Client) Watch(ctx context.Context, changed func()) (*Watch, error) {
	w := &Watch{services: c.informer(Services, &corev1.Service{}), slices: c.informer(EndpointSlices, &discoveryv1.EndpointSlice{})}
	for _, inf := range []cache.SharedIndexInformer{w.services, w.slices} {
		call := func() {
			if w.services.HasSynced() && w.slices.HasSynced() {
				changed()
			}
		}
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { call() },
			UpdateFunc: func(any, any) { call() },
			DeleteFunc: func(any) { call() },
		})
		if err != nil {
			return nil, err
		}
		go inf.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), w.services.HasSynced, w.slices.HasSynced) {
		return nil, errors.Join(fmt.Errorf("watch Services and EndpointSlices: not synced"), context.Cause(ctx))
	}
	changed()
	return w, nil
}

func (c *Client) informer(gvr schema.GroupVersionResource, example runtime.Object) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := lists[gvr]()
			return l, c.request("GET", gvr, "").VersionedParams(&o, metav1.ParameterCodec).Do(ctx).Into(l)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return c.request("GET", gvr, "").VersionedParams(&o, metav1.ParameterCodec).Watch(ctx)
		},
	}
	return cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
}

// Services lists the Services the watch holds, by namespace and name.
func (w *Watch) Services() ([]corev1.Service, error) {
	return listed[corev1.Service](w.services)
}

// EndpointSlices lists the EndpointSlices the watch holds, by namespace and
// name.
func (w *Watch) EndpointSlices() ([]discoveryv1.EndpointSlice, error) {
	return listed[discoveryv1.EndpointSlice](w.slices)
}

func listed[T any, PT interface {
	*T
	Object
}](inf cache.SharedIndexInformer) ([]T, error) {
	items := inf.GetStore().List()
	out := make([]T, len(items))
	for i, it := range items {
		o, ok := it.(PT)
		if !ok {
			return nil, fmt.Errorf("watch: unexpected %T in the store", it)
		}
		// A copy: the store's objects are the informer's own.
		out[i] = *o.DeepCopyObject().(PT)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := PT(&out[i]), PT(&out[j])
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
	return out, nil
}
