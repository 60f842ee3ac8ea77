// Package cluster is a lab's connection to its own kube-apiserver: the objects a
// lab is made of (Nodes, Pods and their status, as a kubelet writes them;
// Services; selectorless EndpointSlices), and a watch of the Services and
// EndpointSlices that the proxies follow.
//
// It speaks protobuf, as Kubernetes' own components do, through one REST client
// per API group version over a scheme of the two groups a lab uses (core and
// discovery): the typed clientset would compile every API group's generated
// client into svclab, and JSON costs the API server, on the same cores as the
// lab, more to decode and encode (up to 1.4 times the objects a second at 500
// Services, no difference at 10,000: docs/benchmarks.md). Every connection is opened inside a lab network namespace
// (Config.Dial): the API server listens there only.
package cluster

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
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
	core, discovery rest.Interface
}

// scheme knows the types of the two API groups a lab uses.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(discoveryv1.AddToScheme(scheme))
}

// New makes a client; it connects on first use.
func New(c Config) (*Client, error) {
	base := rest.Config{
		Host:            c.Server,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CA},
		Dial:            c.Dial,
		UserAgent:       "svclab",
		// No client-side rate limit (a negative QPS): a lab writes hundreds
		// of objects at once when it comes up, the bench 20,000, and the
		// client's default of 5 requests per second would take minutes. The
		// API server, with its own priority and fairness, is the bound: at
		// 10,000 Services the bench's load ran at about 300 objects/s with a
		// limit of 500 requests per second and without one alike.
		QPS:     -1,
		Timeout: 30 * time.Second,
	}
	base.ContentType = runtime.ContentTypeProtobuf
	base.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	base.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	client := func(apiPath string, gv schema.GroupVersion) (rest.Interface, error) {
		rc := base
		rc.APIPath, rc.GroupVersion = apiPath, &gv
		r, err := rest.RESTClientFor(&rc)
		if err != nil {
			return nil, fmt.Errorf("API client for %s: %w", c.Server, err)
		}
		return r, nil
	}
	core, err := client("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	disc, err := client("/apis", discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Client{core: core, discovery: disc}, nil
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

// kinds gives each resource's kind, for messages.
var kinds = map[schema.GroupVersionResource]string{
	Namespaces: "Namespace", Nodes: "Node", Pods: "Pod", Services: "Service",
	ServiceAccounts: "ServiceAccount", EndpointSlices: "EndpointSlice",
}

// lists makes each resource's empty list, for List and the watch.
var lists = map[schema.GroupVersionResource]func() runtime.Object{
	Namespaces: func() runtime.Object { return &corev1.NamespaceList{} },
	Nodes:      func() runtime.Object { return &corev1.NodeList{} },
	Pods:       func() runtime.Object { return &corev1.PodList{} },
	Services:   func() runtime.Object { return &corev1.ServiceList{} },
	ServiceAccounts: func() runtime.Object {
		return &corev1.ServiceAccountList{}
	},
	EndpointSlices: func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
}

// Object is a typed API object (*corev1.Pod, ...).
type Object interface {
	runtime.Object
	metav1.Object
}

// request starts a request of verb on gvr's resources in namespace ("" for a
// cluster-scoped resource, or every namespace).
func (c *Client) request(verb string, gvr schema.GroupVersionResource, namespace string) *rest.Request {
	r := c.core
	if gvr.Group == discoveryv1.GroupName {
		r = c.discovery
	}
	return r.Verb(verb).NamespaceIfScoped(namespace, namespace != "").Resource(gvr.Resource)
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
	err := c.request("POST", gvr, obj.GetNamespace()).
		VersionedParams(&metav1.CreateOptions{FieldManager: "svclab"}, metav1.ParameterCodec).
		Body(obj).Do(ctx).Into(obj)
	if err != nil {
		return fmt.Errorf("create %s: %w", describe(gvr, obj), err)
	}
	return nil
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
	err := c.request("PUT", gvr, obj.GetNamespace()).Name(obj.GetName()).SubResource(sub...).
		VersionedParams(&metav1.UpdateOptions{FieldManager: "svclab"}, metav1.ParameterCodec).
		Body(obj).Do(ctx).Into(obj)
	if err != nil {
		return fmt.Errorf("update %s: %w", describe(gvr, obj), err)
	}
	return nil
}

// Get reads the object namespace/name into out.
func (c *Client) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, out Object) error {
	if err := c.request("GET", gvr, namespace).Name(name).Do(ctx).Into(out); err != nil {
		return fmt.Errorf("get %s %s/%s: %w", kinds[gvr], namespace, name, err)
	}
	return nil
}

// Delete deletes namespace/name. A grace period (pods) leaves the object in
// place with its deletionTimestamp set until someone deletes it for good, as a
// kubelet would once the pod's containers ended; nil is the default. A missing
// object is no error.
func (c *Client) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, grace *int64) error {
	err := c.request("DELETE", gvr, namespace).Name(name).
		Body(&metav1.DeleteOptions{GracePeriodSeconds: grace}).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", kinds[gvr], namespace, name, err)
	}
	return nil
}

// List lists every object of gvr's resource, in every namespace; T is its
// type (*corev1.Service for Services).
func List[T Object](ctx context.Context, c *Client, gvr schema.GroupVersionResource) ([]T, error) {
	l := lists[gvr]()
	if err := c.request("GET", gvr, "").Do(ctx).Into(l); err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		o, ok := it.(T)
		if !ok {
			return nil, fmt.Errorf("list %s: got a %T", gvr.Resource, it)
		}
		out = append(out, o)
	}
	return out, nil
}
