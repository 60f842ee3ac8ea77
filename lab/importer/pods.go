package importer

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svclab/svclab/lab/topology"
)

// podsOf adds the dump's running pods that back no endpoint (a cluster's own
// clients), and gives every pod its labels and container ports. Host-network
// pods are their node; pods of namespaces the cut leaves out stay out.
func (b *builder) podsOf(pods []Object[corev1.Pod]) {
	for _, in := range pods {
		p := in.Obj
		ip, err := netip.ParseAddr(p.Status.PodIP)
		switch {
		case err != nil || !ip.Is4(), p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			continue
		case p.Spec.HostNetwork:
			continue
		case len(b.o.Namespaces) > 0 && !slices.Contains(b.o.Namespaces, p.Namespace):
			continue
		}
		if _, isNode := b.byIP[ip]; isNode {
			continue
		}
		spec := b.pods[ip]
		if spec == nil {
			node, ok := b.nodes[p.Spec.NodeName]
			if !ok {
				b.notef("pod %s/%s: on node %s, which the lab does not have: left out", p.Namespace, p.Name, p.Spec.NodeName)
				continue
			}
			if node.PodCIDR == "" {
				node.PodCIDR = netip.PrefixFrom(ip, 24).Masked().String()
				b.notef("node %s: no podCIDR in its spec: given %s, the /24 of its first pod", p.Spec.NodeName, node.PodCIDR)
			}
			cidr := netip.MustParsePrefix(node.PodCIDR)
			if !cidr.Contains(ip) || ip == cidr.Addr() || ip == cidr.Addr().Next() {
				b.notef("pod %s/%s: %s is outside node %s's podCIDR %s, or its network or gateway address: left out", p.Namespace, p.Name, ip, p.Spec.NodeName, cidr)
				continue
			}
			spec = &topology.PodSpec{Name: b.memberName("pod", p.Name), Namespace: p.Namespace, Node: node.Name, IP: ip.String()}
			if p.Namespace == metav1.NamespaceDefault {
				spec.Namespace = ""
			}
			ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			if !ready {
				spec.Ready = ptr.To(false)
			}
			spec.Terminating = p.DeletionTimestamp != nil
			b.pods[ip] = spec
		}
		spec.Labels = p.Labels
		if spec.Namespace == topology.DNSNamespace && spec.Labels[topology.DNSAppLabel] == topology.DNSServiceName {
			// A CoreDNS replica has kubeadm's container ports: a lab with a
			// cluster DNS runs CoreDNS in it, one without serves them as
			// any pod's (the kept kube-dns Service's endpoints).
			spec.Ports = topology.CoreDNSPorts()
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				cp := corev1.ContainerPort{Name: cp.Name, ContainerPort: cp.ContainerPort, Protocol: cmpProto(cp.Protocol)}
				i := slices.IndexFunc(spec.Ports, func(x corev1.ContainerPort) bool {
					return x.ContainerPort == cp.ContainerPort && x.Protocol == cp.Protocol
				})
				if i < 0 {
					spec.Ports = append(spec.Ports, cp)
				} else if spec.Ports[i].Name == "" {
					spec.Ports[i].Name = cp.Name
				}
			}
		}
	}
}

func cmpProto(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}
