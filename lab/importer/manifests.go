package importer

import (
	"cmp"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/svclab/svclab/lab/topology"
)

// workload is a Deployment, StatefulSet, DaemonSet or ReplicaSet of the input:
// in a manifest (no cluster ran it yet) the pods it would make.
type workload struct {
	Kind, Namespace, Name string
	// Replicas is how many pods it makes; a DaemonSet makes one per node (-1).
	Replicas int
	Template corev1.PodTemplateSpec
	// Owner is the Deployment of a ReplicaSet that has one ("" for none).
	Owner string
}

// readWorkload reads an apps/v1 workload; strict decodes raw into v.
func (d *Dump) readWorkload(where, kind string, strict func(any) error) error {
	var w workload
	switch kind {
	case "Deployment":
		var o appsv1.Deployment
		if err := strict(&o); err != nil {
			return err
		}
		w = workload{Kind: kind, Namespace: o.Namespace, Name: o.Name, Replicas: int(ptr.Deref(o.Spec.Replicas, 1)), Template: o.Spec.Template}
	case "StatefulSet":
		var o appsv1.StatefulSet
		if err := strict(&o); err != nil {
			return err
		}
		w = workload{Kind: kind, Namespace: o.Namespace, Name: o.Name, Replicas: int(ptr.Deref(o.Spec.Replicas, 1)), Template: o.Spec.Template}
	case "DaemonSet":
		var o appsv1.DaemonSet
		if err := strict(&o); err != nil {
			return err
		}
		w = workload{Kind: kind, Namespace: o.Namespace, Name: o.Name, Replicas: -1, Template: o.Spec.Template}
	case "ReplicaSet":
		var o appsv1.ReplicaSet
		if err := strict(&o); err != nil {
			return err
		}
		w = workload{Kind: kind, Namespace: o.Namespace, Name: o.Name, Replicas: int(ptr.Deref(o.Spec.Replicas, 1)), Template: o.Spec.Template}
		if ref := metav1.GetControllerOf(&o); ref != nil && ref.Kind == "Deployment" {
			w.Owner = ref.Name
		}
	}
	w.Namespace = cmp.Or(w.Namespace, metav1.NamespaceDefault)
	d.Workloads = append(d.Workloads, Object[workload]{fmt.Sprintf("%s (%s %s/%s)", where, kind, w.Namespace, w.Name), w})
	return nil
}

// isManifest tells whether the input is what a user writes, not what a
// cluster printed: no EndpointSlice, no Endpoints, no pod with an address.
// Such an input is completed as the API server and the controllers would
// complete it.
func (d *Dump) isManifest() bool {
	return len(d.Slices) == 0 && len(d.Endpoints) == 0 &&
		!slices.ContainsFunc(d.Pods, func(p Object[corev1.Pod]) bool { return p.Obj.Status.PodIP != "" })
}

// madeNodes are the nodes of a manifest that names none: kind's default of
// two, on kind's addresses.
func madeNodes() []Object[corev1.Node] {
	var out []Object[corev1.Node]
	for i := 1; i <= 2; i++ {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Spec:   corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", i)},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.1.%d", 9+i)}}}}
		out = append(out, Object[corev1.Node]{"made by import (Node " + n.Name + ")", n})
	}
	return out
}

// manifestPods are the pods of a manifest: its bare Pods and those its
// workloads make, labelled from their templates, spread over the nodes in
// turn; the lab gives each an address in its node's podCIDR, and derives the
// Services' endpoints from their selectors as the EndpointSlice controller
// does.
func (b *builder) manifestPods(d *Dump) []topology.PodSpec {
	var nodes []string
	for _, n := range d.Nodes {
		if spec, ok := b.nodes[n.Obj.Name]; ok {
			nodes = append(nodes, spec.Name)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	turn := 0
	var out []topology.PodSpec
	add := func(name, namespace, node string, meta metav1.ObjectMeta, spec corev1.PodSpec) {
		if node == "" {
			node = nodes[turn%len(nodes)]
			turn++
		} else if n, ok := b.nodes[node]; ok {
			node = n.Name
		} else {
			b.notef("pod %s/%s: on node %s, which the input does not have: put on %s", namespace, name, node, nodes[0])
			node = nodes[0]
		}
		p := topology.PodSpec{Name: b.memberName("pod", name), Namespace: namespace, Node: node, Labels: meta.Labels}
		if namespace == metav1.NamespaceDefault {
			p.Namespace = ""
		}
		for _, c := range spec.Containers {
			for _, cp := range c.Ports {
				p.Ports = append(p.Ports, corev1.ContainerPort{Name: cp.Name, ContainerPort: cp.ContainerPort, Protocol: cmpProto(cp.Protocol)})
			}
		}
		out = append(out, p)
	}
	for _, in := range d.Pods {
		p := in.Obj
		add(p.Name, cmp.Or(p.Namespace, metav1.NamespaceDefault), p.Spec.NodeName, p.ObjectMeta, p.Spec)
	}
	deployments := map[string]bool{}
	for _, w := range d.Workloads {
		if w.Obj.Kind == "Deployment" {
			deployments[w.Obj.Namespace+"/"+w.Obj.Name] = true
		}
	}
	made := 0
	for _, in := range d.Workloads {
		w := in.Obj
		if w.Owner != "" && deployments[w.Namespace+"/"+w.Owner] {
			continue // its Deployment's pods are made once, from the Deployment
		}
		if len(b.o.Namespaces) > 0 && !slices.Contains(b.o.Namespaces, w.Namespace) {
			continue
		}
		if w.Replicas < 0 {
			for _, n := range nodes {
				add(w.Name+"-"+n, w.Namespace, n, w.Template.ObjectMeta, w.Template.Spec)
				made++
			}
			continue
		}
		for i := range w.Replicas {
			add(fmt.Sprintf("%s-%d", w.Name, i), w.Namespace, w.Template.Spec.NodeName, w.Template.ObjectMeta, w.Template.Spec)
			made++
		}
	}
	if made > 0 {
		b.notef("a manifest: made %d pods of its %d workloads (replicas as given, a DaemonSet's on every node), spread over the nodes; the lab gives them addresses and derives the Services' endpoints from their selectors", made, len(d.Workloads))
	}
	return out
}

// unselected notes the Services of a manifest whose selector matches none of
// its pods: they have no endpoints in the lab.
func (b *builder) unselected() {
	for _, s := range b.res.File.Services {
		if len(s.Spec.Selector) == 0 || s.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		sel := labels.SelectorFromSet(s.Spec.Selector)
		if !slices.ContainsFunc(b.res.File.Pods, func(p topology.PodSpec) bool {
			return cmp.Or(p.Namespace, metav1.NamespaceDefault) == s.Namespace && sel.Matches(labels.Set(p.Labels))
		}) {
			b.notef("Service %s/%s: selects pods (%s), but the input has no EndpointSlice, Endpoints, Pod or workload of it: it has no endpoints in the lab", s.Namespace, s.Name, sel)
		}
	}
}

// serviceIPsAllocated says that a Service without a ClusterIP (a manifest's)
// gets one from the lab's serviceCIDR, as the API server would allocate it.
func serviceIPsAllocated(s *corev1.Service) bool {
	return s.Spec.ClusterIP == "" && len(s.Spec.ClusterIPs) == 0 && s.Spec.Type != corev1.ServiceTypeExternalName
}
