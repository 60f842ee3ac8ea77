// Package importer turns what kubectl prints of a real cluster (its Nodes,
// Services and EndpointSlices, and kube-proxy's ConfigMap) into a svclab
// topology file, and says what of the cluster the file cannot hold.
package importer

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"
)

// Dump is what the input files held, each object with where it came from.
type Dump struct {
	Nodes    []Object[corev1.Node]
	Services []Object[corev1.Service]
	Slices   []Object[discoveryv1.EndpointSlice]
	// Endpoints stand in for the slices of a Service that has none in the
	// input (`kubectl get svc,ep`, must-gather's core/endpoints.yaml).
	Endpoints []Object[corev1.Endpoints]
	// Workloads are a manifest's Deployments, StatefulSets, DaemonSets and
	// ReplicaSets: the pods they would make stand in for the pods of an input
	// no cluster ran.
	Workloads []Object[workload]
	// Pods are optional (kubectl get ...,pods): they add the pods that back
	// no endpoint (clients inside the cluster) and name every pod's ports.
	Pods      []Object[corev1.Pod]
	KubeProxy *Object[kubeproxyconfig.KubeProxyConfiguration]
	// KubeProxyUnknown says which of its fields the configuration of the
	// kube-proxy release svclab knows does not have ("" when none).
	KubeProxyUnknown string
	// Ignored counts objects of other kinds by kind (kubectl get all prints
	// Pods, Deployments...), which the topology does not need.
	Ignored map[string]int
}

// Object is one object of the dump and its place: "FILE:items[3]".
type Object[T any] struct {
	Where string
	Obj   T
}

// InputError is bad input: a file, the place in it and what is wrong.
type InputError struct {
	Where string
	Msg   string
}

func (e *InputError) Error() string { return e.Where + ": " + e.Msg }

func inputErrorf(where, format string, args ...any) error {
	return &InputError{Where: where, Msg: fmt.Sprintf(format, args...)}
}

// Read reads every path: a file, or a directory whose *.yaml, *.yml and *.json
// files are read in name order at any depth (what `kubectl cluster-info dump
// --output-directory` and must-gather write: a file per kind under a directory
// per namespace).
func Read(paths []string) (*Dump, error) {
	d := &Dump{Ignored: map[string]int{}}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, &InputError{Where: p, Msg: err.Error()}
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		n := len(files)
		err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				if e.Type().IsRegular() {
					files = append(files, path)
				}
			}
			return nil
		})
		if err != nil {
			return nil, &InputError{Where: p, Msg: err.Error()}
		}
		if len(files) == n {
			return nil, inputErrorf(p, "no .yaml, .yml or .json file in the directory or below it")
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, &InputError{Where: f, Msg: err.Error()}
		}
		if err := d.readFile(f, data); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// readFile reads one file: YAML documents or JSON values, each an object or a
// List of them.
func (d *Dump) readFile(name string, data []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	objects := 0
	for doc := 0; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		where := name
		if doc > 0 {
			where = fmt.Sprintf("%s:document %d", name, doc+1)
		}
		if err != nil {
			return inputErrorf(where, "not YAML or JSON: %v", err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		n, err := d.readValue(where, raw, typeMeta{})
		if err != nil {
			return err
		}
		objects += n
	}
	if objects == 0 {
		return inputErrorf(name, "no Kubernetes object: want what `kubectl get nodes,services,endpointslices -A -o yaml` prints")
	}
	return nil
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// readValue reads one object or list. A typed list (ServiceList, what
// `kubectl cluster-info dump` and the API itself print) leaves kind and
// apiVersion out of its items: they are the list's, less "List", and come in
// as outer.
func (d *Dump) readValue(where string, raw json.RawMessage, outer typeMeta) (int, error) {
	var tm typeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return 0, inputErrorf(where, "not a Kubernetes object: %v", err)
	}
	if tm.Kind == "" && tm.APIVersion == "" {
		tm.Kind, tm.APIVersion = outer.Kind, outer.APIVersion
	}
	if tm.Kind == "List" || strings.HasSuffix(tm.Kind, "List") && tm.Items != nil {
		var item typeMeta
		if tm.Kind != "List" {
			item = typeMeta{Kind: strings.TrimSuffix(tm.Kind, "List"), APIVersion: tm.APIVersion}
		}
		for i, it := range tm.Items {
			if _, err := d.readValue(fmt.Sprintf("%s:items[%d]", where, i), it, item); err != nil {
				return 0, err
			}
		}
		// An empty list is still kubectl's output (a namespace without
		// Services in a cluster-info dump): it counts as what was read.
		return max(len(tm.Items), 1), nil
	}
	return 1, d.readObject(where, tm, raw)
}

func (d *Dump) readObject(where string, tm typeMeta, raw json.RawMessage) error {
	if tm.Kind == "" {
		return inputErrorf(where, "kind: required (every object kubectl prints has one)")
	}
	strict := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(v); err != nil {
			return inputErrorf(where, "%s: %v", tm.Kind, err)
		}
		return nil
	}
	switch {
	case tm.Kind == "Node" && tm.APIVersion == "v1":
		var n corev1.Node
		if err := strict(&n); err != nil {
			return err
		}
		d.Nodes = append(d.Nodes, Object[corev1.Node]{where + " (Node " + n.Name + ")", n})
	case tm.Kind == "Service" && tm.APIVersion == "v1":
		var s corev1.Service
		if err := strict(&s); err != nil {
			return err
		}
		// A manifest leaves it out: kubectl apply puts it in "default".
		s.Namespace = cmp.Or(s.Namespace, metav1.NamespaceDefault)
		d.Services = append(d.Services, Object[corev1.Service]{where + " (Service " + s.Namespace + "/" + s.Name + ")", s})
	case tm.Kind == "EndpointSlice" && tm.APIVersion == discoveryv1.SchemeGroupVersion.String():
		var s discoveryv1.EndpointSlice
		if err := strict(&s); err != nil {
			return err
		}
		d.Slices = append(d.Slices, Object[discoveryv1.EndpointSlice]{where + " (EndpointSlice " + s.Namespace + "/" + s.Name + ")", s})
	case tm.Kind == "EndpointSlice" && tm.APIVersion == discoveryv1beta1.SchemeGroupVersion.String():
		var s discoveryv1beta1.EndpointSlice
		if err := strict(&s); err != nil {
			return err
		}
		d.Slices = append(d.Slices, Object[discoveryv1.EndpointSlice]{where + " (EndpointSlice " + s.Namespace + "/" + s.Name + ")", fromV1beta1(s)})
	case tm.Kind == "Endpoints" && tm.APIVersion == "v1":
		var e corev1.Endpoints
		if err := strict(&e); err != nil {
			return err
		}
		d.Endpoints = append(d.Endpoints, Object[corev1.Endpoints]{where + " (Endpoints " + e.Namespace + "/" + e.Name + ")", e})
	case tm.Kind == "Pod" && tm.APIVersion == "v1":
		var p corev1.Pod
		if err := strict(&p); err != nil {
			return err
		}
		p.Namespace = cmp.Or(p.Namespace, metav1.NamespaceDefault)
		d.Pods = append(d.Pods, Object[corev1.Pod]{where + " (Pod " + p.Namespace + "/" + p.Name + ")", p})
	case tm.Kind == "ConfigMap" && tm.APIVersion == "v1":
		var cm corev1.ConfigMap
		if err := strict(&cm); err != nil {
			return err
		}
		return d.readKubeProxyConfigMap(where+" (ConfigMap "+cm.Namespace+"/"+cm.Name+")", cm)
	case slices.Contains([]string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}, tm.Kind) && tm.APIVersion == "apps/v1":
		return d.readWorkload(where, tm.Kind, strict)
	case tm.Kind == "KubeProxyConfiguration":
		return d.readKubeProxyConfig(where, raw)
	case slices.Contains([]string{"Node", "Service", "EndpointSlice", "Endpoints", "ConfigMap", "Pod"}, tm.Kind):
		return inputErrorf(where, "apiVersion: %q is not an apiVersion of %s svclab reads", tm.APIVersion, tm.Kind)
	default:
		d.Ignored[tm.Kind]++
	}
	return nil
}

// readKubeProxyConfigMap reads kube-proxy's configuration from its ConfigMap
// (kubeadm's kube-system/kube-proxy keeps it under config.conf); any other
// ConfigMap is ignored.
func (d *Dump) readKubeProxyConfigMap(where string, cm corev1.ConfigMap) error {
	for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
		v := cm.Data[key]
		if !strings.Contains(v, "KubeProxyConfiguration") {
			continue
		}
		return d.readKubeProxyConfig(where+".data["+key+"]", []byte(v))
	}
	d.Ignored["ConfigMap"]++
	return nil
}

func (d *Dump) readKubeProxyConfig(where string, data []byte) error {
	if d.KubeProxy != nil {
		return inputErrorf(where, "a second KubeProxyConfiguration (the first is %s)", d.KubeProxy.Where)
	}
	var c kubeproxyconfig.KubeProxyConfiguration
	// Older releases have fields 1.37 dropped (portRange, udpIdleTimeout):
	// those are read past, and said so.
	if err := sigsyaml.UnmarshalStrict(data, &c); err != nil {
		if err := sigsyaml.Unmarshal(data, &c); err != nil {
			return inputErrorf(where, "KubeProxyConfiguration: %v", err)
		}
		d.KubeProxyUnknown = strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: json: ")
	}
	d.KubeProxy = &Object[kubeproxyconfig.KubeProxyConfiguration]{where, c}
	return nil
}

// fromV1beta1 is a discovery.k8s.io/v1beta1 slice (what kubectl of clusters
// before 1.21 prints) as v1 holds it: the node was topology's
// kubernetes.io/hostname until nodeName came.
func fromV1beta1(s discoveryv1beta1.EndpointSlice) discoveryv1.EndpointSlice {
	out := discoveryv1.EndpointSlice{
		TypeMeta:    s.TypeMeta,
		ObjectMeta:  s.ObjectMeta,
		AddressType: discoveryv1.AddressType(s.AddressType),
	}
	out.APIVersion = discoveryv1.SchemeGroupVersion.String()
	for _, p := range s.Ports {
		out.Ports = append(out.Ports, discoveryv1.EndpointPort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, AppProtocol: p.AppProtocol})
	}
	for _, e := range s.Endpoints {
		ep := discoveryv1.Endpoint{
			Addresses: e.Addresses,
			Conditions: discoveryv1.EndpointConditions{
				Ready: e.Conditions.Ready, Serving: e.Conditions.Serving, Terminating: e.Conditions.Terminating,
			},
			Hostname:  e.Hostname,
			TargetRef: e.TargetRef,
			NodeName:  e.NodeName,
		}
		if ep.NodeName == nil {
			if h, ok := e.Topology[corev1.LabelHostname]; ok {
				ep.NodeName = ptr.To(h)
			}
		}
		if z, ok := e.Topology[corev1.LabelTopologyZone]; ok {
			ep.Zone = ptr.To(z)
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	return out
}
