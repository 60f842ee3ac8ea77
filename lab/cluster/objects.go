package cluster

import (
	"cmp"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svclab/svclab/lab/topology"
)

// Objects of a lab that svclab writes itself, as a kubelet and a node
// controller would: its Nodes and Pods with their status. Services and
// selectorless EndpointSlices are the topology's own objects.

// containerName is the one container of every lab pod: svclab serves its ports
// from the pod's network namespace, no container runs.
const containerName = "server"

// image names what the container would run; nothing pulls it.
const image = "svclab.invalid/server"

// Node is the Node object of a lab node, with the status a kubelet reports:
// its address, Ready.
func Node(n topology.Node, now time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   n.Name,
			Labels: map[string]string{corev1.LabelHostname: n.Name, corev1.LabelOSStable: "linux"},
		},
		Spec: corev1.NodeSpec{PodCIDR: n.PodCIDR.String(), PodCIDRs: []string{n.PodCIDR.String()}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.IP.String()},
				{Type: corev1.NodeHostName, Address: n.Name},
			},
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message:           "svclab plays the kubelet",
				LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
			}},
		},
	}
}

// Pod is the Pod object of a lab pod: scheduled to its node, its ports declared
// on one container. Its status comes from PodStatus.
func Pod(p topology.Pod) *corev1.Pod {
	ports := append([]corev1.ContainerPort(nil), p.Ports...)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
		Spec: corev1.PodSpec{
			NodeName:                     p.Node,
			Containers:                   []corev1.Container{{Name: containerName, Image: image, Ports: ports}},
			AutomountServiceAccountToken: ptr.To(false),
		},
	}
	if p.Component != "" {
		// A component's pod, as its manifest has it: CoreDNS's container, and
		// the node's resolv.conf for CoreDNS itself (kubeadm's dnsPolicy).
		pod.Spec.Containers[0].Name = p.Component
		pod.Spec.DNSPolicy = corev1.DNSDefault
	}
	return pod
}

// PodStatus is the status a kubelet reports for a running lab pod: its
// address, and Ready as the topology says.
func PodStatus(p topology.Pod, hostIP string, now time.Time) corev1.PodStatus {
	ready := corev1.ConditionFalse
	if p.Ready {
		ready = corev1.ConditionTrue
	}
	t := metav1.NewTime(now)
	cond := func(typ corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: s, LastTransitionTime: t}
	}
	return corev1.PodStatus{
		Phase:  corev1.PodRunning,
		HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		PodIP: p.IP.String(), PodIPs: []corev1.PodIP{{IP: p.IP.String()}},
		StartTime: &t,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled, corev1.ConditionTrue),
			cond(corev1.PodInitialized, corev1.ConditionTrue),
			cond(corev1.ContainersReady, ready),
			cond(corev1.PodReady, ready),
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: cmp.Or(p.Component, containerName), Image: image, ImageID: image, Ready: p.Ready, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
		}},
	}
}

// NamespacesOf are the namespaces a lab's pods and Services live in besides
// those the API server makes itself, sorted.
func NamespacesOf(t *topology.Topology) []*corev1.Namespace {
	builtin := map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}
	seen := map[string]bool{}
	add := func(ns string) {
		if ns != "" && !builtin[ns] {
			seen[ns] = true
		}
	}
	for _, p := range t.Pods {
		add(p.Namespace)
	}
	for _, s := range t.DeclaredServices {
		add(s.Namespace)
	}
	for _, s := range t.UserEndpointSlices {
		add(s.Namespace)
	}
	names := make([]string, 0, len(seen))
	for ns := range seen {
		names = append(names, ns)
	}
	sort.Strings(names)
	out := make([]*corev1.Namespace, len(names))
	for i, ns := range names {
		out[i] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
