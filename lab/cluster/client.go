// Package cluster is a lab's connection to its own kube-apiserver: the objects a
// lab is made of (Nodes, Pods and their status, as a kubelet writes them;
// Services; selectorless EndpointSlices), and a watch of the Services and
// EndpointSlices that the proxies follow.
//
// It speaks to the API server with client-go's dynamic client and converts to
// and from the typed objects of k8s.io/api: the typed clientset would compile
// every API group's generated code into svclab for the four resources a lab
// uses. Every connection is opened inside a lab network namespace (Config.Dial):
// the API server listens there only.
package cluster

import (
	"context"
	"fmt"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Config says how to reach the API server.
type Config struct {
	// Server is its URL, https://ADDRESS:PORT.
	Server string
	// CA is the PEM certificate authority that signed its serving certificate.
	CA []byte
	// Token is a bearer token with the rights the lab needs.
	Token string
	// Dial opens a connection from inside the lab's network.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is a lab's API client.
type Client struct {
	dyn dynamic.Interface
}

// New makes a client; it connects on first use.
func New(c Config) (*Client, error) {
	rc := &rest.Config{
		Host:            c.Server,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CA},
		Dial:            c.Dial,
		UserAgent:       "svclab",
		// A lab writes hundreds of objects at once when it comes up; the
		// client's default of 5 requests per second would take minutes.
		QPS:     500,
		Burst:   1000,
		Timeout: 30 * time.Second,
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("API client for %s: %w", c.Server, err)
	}
	return &Client{dyn: dyn}, nil
}

// Resources a lab uses.
var (
	Namespaces      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	Nodes           = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	Pods            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	Services        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	ServiceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	EndpointSlices  = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
)

// kinds gives each resource's kind, which a request body must carry.
var kinds = map[schema.GroupVersionResource]string{
	Namespaces: "Namespace", Nodes: "Node", Pods: "Pod", Services: "Service",
	ServiceAccounts: "ServiceAccount", EndpointSlices: "EndpointSlice",
}

// Object is a typed API object (*corev1.Pod, ...).
type Object interface {
	runtime.Object
	metav1.Object
}

func (c *Client) resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return c.dyn.Resource(gvr)
	}
	return c.dyn.Resource(gvr).Namespace(namespace)
}

func toUnstructured(gvr schema.GroupVersionResource, obj Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kinds[gvr])
	return u, nil
}

// into converts what the API server returned into out, a typed object.
func into(u *unstructured.Unstructured, out Object) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

func describe(gvr schema.GroupVersionResource, obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return fmt.Sprintf("%s %s", kinds[gvr], obj.GetName())
	}
	return fmt.Sprintf("%s %s/%s", kinds[gvr], obj.GetNamespace(), obj.GetName())
}

// Create creates obj and fills it with what the API server made of it (its
// allocated fields, resource version, uid).
func (c *Client) Create(ctx context.Context, gvr schema.GroupVersionResource, obj Object) error {
	u, err := toUnstructured(gvr, obj)
	if err != nil {
		return fmt.Errorf("create %s: %w", describe(gvr, obj), err)
	}
	got, err := c.resource(gvr, obj.GetNamespace()).Create(ctx, u, metav1.CreateOptions{FieldManager: "svclab"})
	if err != nil {
		return fmt.Errorf("create %s: %w", describe(gvr, obj), err)
	}
	return into(got, obj)
}

// Ensure creates obj unless an object of its name exists.
func (c *Client) Ensure(ctx context.Context, gvr schema.GroupVersionResource, obj Object) error {
	err := c.Create(ctx, gvr, obj)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// Update replaces obj (its resource version must be current) and fills it with
// the result.
func (c *Client) Update(ctx context.Context, gvr schema.GroupVersionResource, obj Object) error {
	return c.update(ctx, gvr, obj, nil)
}

// UpdateStatus replaces obj's status, as a kubelet does.
func (c *Client) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj Object) error {
	return c.update(ctx, gvr, obj, []string{"status"})
}

func (c *Client) update(ctx context.Context, gvr schema.GroupVersionResource, obj Object, sub []string) error {
	u, err := toUnstructured(gvr, obj)
	if err != nil {
		return fmt.Errorf("update %s: %w", describe(gvr, obj), err)
	}
	got, err := c.resource(gvr, obj.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{FieldManager: "svclab"}, sub...)
	if err != nil {
		return fmt.Errorf("update %s: %w", describe(gvr, obj), err)
	}
	return into(got, obj)
}

// Get reads the object namespace/name into out.
func (c *Client) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, out Object) error {
	got, err := c.resource(gvr, namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get %s %s/%s: %w", kinds[gvr], namespace, name, err)
	}
	return into(got, out)
}

// Delete deletes namespace/name. A grace period (pods) leaves the object in
// place with its deletionTimestamp set until someone deletes it for good, as a
// kubelet would once the pod's containers ended; nil is the default. A missing
// object is no error.
func (c *Client) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, grace *int64) error {
	err := c.resource(gvr, namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", kinds[gvr], namespace, name, err)
	}
	return nil
}

// List lists every object of a resource, in every namespace, into typed objects
// made by newObj.
func List[T Object](ctx context.Context, c *Client, gvr schema.GroupVersionResource, newObj func() T) ([]T, error) {
	l, err := c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	out := make([]T, 0, len(l.Items))
	for i := range l.Items {
		o := newObj()
		if err := into(&l.Items[i], o); err != nil {
			return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		out = append(out, o)
	}
	return out, nil
}
