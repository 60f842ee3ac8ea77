package topology

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

const defaultNamespace = "default"

func (r *resolver) podSpecs(specs []PodSpec) {
	// Addresses the user chose are claimed first, so that allocation never takes
	// one of them, whatever the order of the pods.
	var unallocated, unallocated6 []int
	for i, s := range specs {
		path := index("pods", i)
		p := Pod{
			Name:        s.Name,
			Namespace:   s.Namespace,
			Node:        s.Node,
			Labels:      maps.Clone(s.Labels),
			Ready:       s.Ready == nil || *s.Ready,
			Terminating: s.Terminating,
		}
		r.memberName(child(path, "name"), s.Name)
		if p.Namespace == "" {
			p.Namespace = defaultNamespace
		} else {
			r.namespace(child(path, "namespace"), p.Namespace)
		}
		r.labels(child(path, "labels"), s.Labels)
		p.Ports = r.containerPorts(child(path, "ports"), s.Ports)
		node, nodeOK := r.podNode(child(path, "node"), s.Node)
		// Say what is wrong with an address even when its node is unknown.
		v4, v6, _ := r.memberIPs(path, s.IP, s.IPs)
		if nodeOK {
			p.IP = r.podIP(v4, p, node.PodCIDR, node.Gateway(), node.Name)
			if !v4.ip.IsValid() && s.IP == "" && len(s.IPs) == 0 {
				unallocated = append(unallocated, i)
			}
			switch {
			case v6.ip.IsValid():
				p.IP6 = r.podIP(v6, p, node.PodCIDR6, node.Gateway6(), node.Name)
			case node.PodCIDR6.IsValid() && len(s.IPs) < 2:
				// The IPv6 address is allocated whether the IPv4 one is given or not,
				// as a dual-stack pod has one address of each of its node's families.
				unallocated6 = append(unallocated6, i)
			}
		}
		r.t.Pods = append(r.t.Pods, p)
	}
	for _, i := range unallocated {
		r.allocatePodIP(i, false)
	}
	for _, i := range unallocated6 {
		r.allocatePodIP(i, true)
	}
}

// podIP checks an address the file gives pod p in its node's podCIDR of that
// family, whose gateway is gw, and claims it.
func (r *resolver) podIP(m memberIP, p Pod, podCIDR netip.Prefix, gw netip.Addr, node string) netip.Addr {
	ip := m.ip
	switch {
	case !ip.IsValid():
	case !podCIDR.IsValid():
		r.errorf(m.path, "%s is %s, but node %s has no %s podCIDR", ip, family(ip), node, family(ip))
	case !podCIDR.Contains(ip):
		r.errorf(m.path, "%s is outside node %s's podCIDR %s", ip, node, podCIDR)
	case ip == gw:
		r.errorf(m.path, "%s is the gateway of node %s (its cni0 address, the first host of podCIDR %s)", ip, node, podCIDR)
	case reservedIn(ip, podCIDR) != "":
		r.errorf(m.path, "%s is %s of node %s's podCIDR %s", ip, reservedIn(ip, podCIDR), node, podCIDR)
	case r.claim(m.path, ip, "pod "+p.Key()):
		return ip
	}
	return netip.Addr{}
}

// allocatePodIP gives pod i the first free address of its node's podCIDR of
// one family, after the gateway, as host-local IPAM does.
func (r *resolver) allocatePodIP(i int, v6 bool) {
	p := &r.t.Pods[i]
	node := r.nodes[p.Node]
	cidr, gw, field := node.PodCIDR, node.Gateway(), child(index("pods", i), "ip")
	if v6 {
		cidr, gw, field = node.PodCIDR6, node.Gateway6(), child(index("pods", i), "ips")
	}
	ip, ok := r.nextFree(cidr, gw.Next())
	if !ok {
		r.errorf(index("pods", i), "node %s's podCIDR %s has no free address left for the pod", node.Name, cidr)
		return
	}
	r.claim(field, ip, "pod "+p.Key())
	if v6 {
		p.IP6 = ip
	} else {
		p.IP = ip
	}
}

// nextFree is the lowest address of p from start on that nobody has, leaving out
// the broadcast address. Allocation only begins once every address the file
// gives is claimed, and then only takes addresses, so each prefix keeps a cursor
// where the last search stopped: a lab of thousands of Services stays linear.
func (r *resolver) nextFree(p netip.Prefix, start netip.Addr) (netip.Addr, bool) {
	if c, ok := r.cursors[p]; ok && start.Less(c) {
		start = c
	}
	last := LastAddr(p)
	for a := start; a.IsValid() && a.Less(last); a = a.Next() {
		if _, taken := r.addrs[a]; !taken {
			r.cursors[p] = a
			return a, true
		}
	}
	r.cursors[p] = last
	return netip.Addr{}, false
}

func (r *resolver) podNode(path, name string) (Node, bool) {
	if name == "" {
		r.errorf(path, "required: the node the pod runs on")
		return Node{}, false
	}
	n, ok := r.nodes[name]
	if !ok {
		if slices.ContainsFunc(r.t.Nodes, func(n Node) bool { return n.Name == name }) {
			return Node{}, false // the node itself is in error
		}
		r.errorf(path, "unknown node %q%s", name, r.knownNodes())
	}
	return n, ok
}

func (r *resolver) knownNodes() string {
	var names []string
	for _, n := range r.t.Nodes {
		if n.Name != "" {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf(" (nodes: %v)", names)
}

func (r *resolver) namespace(path, ns string) {
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		r.errorf(path, "%q: %s", ns, msgs[0])
	}
}

// labels checks label keys and values as the API server does.
func (r *resolver) labels(path string, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		p := key(path, k)
		for _, m := range validation.IsQualifiedName(k) {
			r.errorf(p, "key %q: %s", k, m)
		}
		for _, m := range validation.IsValidLabelValue(labels[k]) {
			r.errorf(p, "value %q: %s", labels[k], m)
		}
	}
}

func (r *resolver) containerPorts(path string, ports []corev1.ContainerPort) []corev1.ContainerPort {
	out := make([]corev1.ContainerPort, 0, len(ports))
	names := map[string]int{}
	numbers := map[corev1.ContainerPort]int{}
	for i, cp := range ports {
		p := index(path, i)
		if cp.Protocol == "" {
			cp.Protocol = corev1.ProtocolTCP
		}
		r.protocol(child(p, "protocol"), cp.Protocol)
		if cp.ContainerPort == 0 {
			r.errorf(child(p, "containerPort"), "required: the port the pod listens on")
		} else {
			r.errorsf(child(p, "containerPort"), validation.IsValidPortNum(int(cp.ContainerPort)))
		}
		if cp.Name != "" {
			r.errorsf(child(p, "name"), quoted(cp.Name, validation.IsValidPortName(cp.Name)))
			if first, dup := names[cp.Name]; dup {
				r.errorf(child(p, "name"), "%q is already the name of ports[%d]", cp.Name, first)
			} else {
				names[cp.Name] = i
			}
		}
		k := corev1.ContainerPort{ContainerPort: cp.ContainerPort, Protocol: cp.Protocol}
		if first, dup := numbers[k]; dup && cp.ContainerPort != 0 {
			r.errorf(child(p, "containerPort"), "%d/%s is already ports[%d]", cp.ContainerPort, cp.Protocol, first)
		} else {
			numbers[k] = i
		}
		if cp.HostPort != 0 {
			r.errorf(child(p, "hostPort"), "host ports are not supported: svclab models Services, not the portmap CNI plugin")
		}
		if cp.HostIP != "" {
			r.errorf(child(p, "hostIP"), "host ports are not supported: svclab models Services, not the portmap CNI plugin")
		}
		out = append(out, cp)
	}
	return out
}

// protocol accepts what kube-proxy programs in this lab: TCP and UDP.
func (r *resolver) protocol(path string, p corev1.Protocol) {
	switch p {
	case corev1.ProtocolTCP, corev1.ProtocolUDP:
	case corev1.ProtocolSCTP:
		r.errorf(path, "SCTP is not supported (svclab sends TCP and UDP traffic)")
	default:
		r.errorf(path, "%q: must be TCP or UDP", p)
	}
}

func quoted(value string, msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = fmt.Sprintf("%q: %s", value, m)
	}
	return out
}
