// Package topology reads svclab's lab files: fake nodes, pods, clients and plain
// Kubernetes Service and EndpointSlice objects. It validates them, allocates what a
// cluster would allocate (pod IPs, ClusterIPs, nodePorts) and computes endpoints the
// way the EndpointSlice controller does. Nothing here needs root.
package topology

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// File is the YAML document as the user writes it. Field names are part of the
// user-facing format; see topologies/web.yaml.
type File struct {
	Name string `json:"name"`
	// ClusterCIDR and ServiceCIDR are one prefix, or an IPv4 and an IPv6 one
	// separated by a comma, IPv4 first, as kube-controller-manager's
	// --cluster-cidr and the API server's --service-cluster-ip-range take them:
	// "10.244.0.0/16,fd00:10:244::/56" is a dual-stack cluster.
	ClusterCIDR string `json:"clusterCIDR"`
	ServiceCIDR string `json:"serviceCIDR"`
	// NodeCIDR is the node network, one prefix a family as above. When empty it
	// is, in each family, the smallest prefix (at most a /24, an IPv6 /64) that
	// holds every node and client address of that family.
	NodeCIDR string `json:"nodeCIDR,omitempty"`
	// KubeProxyVersion selects the kube-proxy release whose rules are reproduced
	// ("1.37" when empty); the command-line flag overrides it.
	KubeProxyVersion string `json:"kubeProxyVersion,omitempty"`
	// NodePortRange is the API server's --service-node-port-range,
	// "first-last"; empty: 30000-32767.
	NodePortRange string `json:"nodePortRange,omitempty"`
	// ControlPlane runs a real kube-apiserver and the EndpointSlice controller in
	// a member of its own on the node network, and applies the lab through them.
	ControlPlane bool `json:"controlPlane,omitempty"`
	// DNS runs the cluster DNS in a lab with a control plane, as kubeadm sets it
	// up: CoreDNS pods in kube-system behind the kube-dns Service, and pods that
	// resolve through it. Unset means on; false turns it off.
	DNS *bool `json:"dns,omitempty"`
	// ClusterDomain is the DNS zone of the lab's Services (kubelet's
	// clusterDomain); cluster.local when empty.
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// ClusterDNS is the kube-dns Service's ClusterIP (kubelet's clusterDNS); the
	// tenth address of serviceCIDR when empty, as kubeadm chooses it.
	ClusterDNS     string                      `json:"clusterDNS,omitempty"`
	Nodes          []NodeSpec                  `json:"nodes"`
	Pods           []PodSpec                   `json:"pods,omitempty"`
	Clients        []ClientSpec                `json:"clients,omitempty"`
	Services       []corev1.Service            `json:"services,omitempty"`
	EndpointSlices []discoveryv1.EndpointSlice `json:"endpointSlices,omitempty"`

	// LoadBalancerCIDR is the pool LoadBalancer Services get their ingress IPs
	// from when their status gives none (the node network when empty).
	LoadBalancerCIDR string `json:"loadBalancerCIDR,omitempty"`
	// LoadBalancers are the lab's load balancers; when none is given and a
	// LoadBalancer Service without a loadBalancerClass exists, one called "lb".
	LoadBalancers []LoadBalancerSpec `json:"loadBalancers,omitempty"`
	// ExternalIPRoutes say which nodes the clients route each Service external
	// IP to; an external IP not listed goes to the first node.
	ExternalIPRoutes []ExternalIPRouteSpec `json:"externalIPRoutes,omitempty"`
}

// NodeSpec is one fake node: a network namespace with the node address on eth0 and
// its pods behind the cni0 bridge.
//
// Each singular field has a plural beside it as Kubernetes' podCIDR has
// podCIDRs: the plural lists one value a family, the singular first (IPv4:
// svclab builds IPv4-primary labs), and either may be left out.
type NodeSpec struct {
	Name     string   `json:"name"`
	IP       string   `json:"ip"`
	IPs      []string `json:"ips,omitempty"`
	PodCIDR  string   `json:"podCIDR"`
	PodCIDRs []string `json:"podCIDRs,omitempty"`
}

// PodSpec is one fake pod: a network namespace on its node's cni0 bridge, serving
// every declared port.
type PodSpec struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Node      string `json:"node"`
	IP        string `json:"ip,omitempty"`
	// IPs are the pod's addresses, one a family of its node's podCIDRs, as
	// Kubernetes' podIPs; a family left out is allocated from the node's
	// podCIDR of that family.
	IPs    []string          `json:"ips,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Ready is the pod's Ready condition; nil means true.
	Ready *bool `json:"ready,omitempty"`
	// Terminating marks a pod being deleted (deletionTimestamp set): its endpoint is
	// not ready, and serving only while Ready is true.
	Terminating bool                   `json:"terminating,omitempty"`
	Ports       []corev1.ContainerPort `json:"ports,omitempty"`
}

// ClientSpec is a machine outside the cluster, on the node network.
type ClientSpec struct {
	Name string   `json:"name"`
	IP   string   `json:"ip"`
	IPs  []string `json:"ips,omitempty"`
}

// Topology is a validated lab with every address and port allocated. It is what the
// rest of svclab consumes; Services keep their Kubernetes shape so that a lab can
// change them the way kubectl would.
type Topology struct {
	// Source names where the topology came from (a path, or "<embedded>/web.yaml"),
	// for error messages.
	Source      string
	Name        string
	ClusterCIDR netip.Prefix
	ServiceCIDR netip.Prefix
	NodeCIDR    netip.Prefix
	// ClusterCIDR6, ServiceCIDR6 and NodeCIDR6 are the IPv6 halves of a
	// dual-stack lab; not valid in an IPv4-only one. A lab has IPv6 exactly
	// when ClusterCIDR6 is valid, and then every node has IPv6 too.
	ClusterCIDR6     netip.Prefix
	ServiceCIDR6     netip.Prefix
	NodeCIDR6        netip.Prefix
	KubeProxyVersion string
	// NodePortRange is where node ports are allocated and must lie.
	NodePortRange PortRange
	// ControlPlane is the API server's member, nil without a control plane.
	ControlPlane *ControlPlane
	// DNS is the cluster DNS, nil in a lab without one (no control plane, or
	// dns: false). Its pods are among Pods, its Service among Services.
	DNS *DNS
	// dnsFile is what the file says of the cluster DNS, written back by a
	// mutation even while the lab has none (a control plane may come later).
	dnsFile dnsFields
	Nodes   []Node
	Pods    []Pod
	Clients []Client
	// Services have spec.clusterIP(s), ports[].nodePort and healthCheckNodePort filled
	// in where the API server would have allocated them, and LoadBalancer
	// Services status.loadBalancer.ingress where their load balancer would have.
	Services []corev1.Service
	// DeclaredServices are the Services as the file gives them, before any
	// allocation: what a lab with a control plane creates, leaving the rest to the
	// API server.
	DeclaredServices []corev1.Service
	// UserEndpointSlices are the user-given slices (for selectorless Services)
	// only; EndpointSlices() adds the ones the controller derives from selectors.
	// (A field cannot share the method's name, so it is not called EndpointSlices.)
	UserEndpointSlices []discoveryv1.EndpointSlice

	// LoadBalancerCIDR is the pool of ingress IPs: loadBalancerCIDR, or the node
	// network.
	LoadBalancerCIDR netip.Prefix
	// LoadBalancers are the load balancer members, the default one included.
	LoadBalancers []LoadBalancer
	// ExternalIPRoutes route every external IP of every Service, in the order
	// the Services list them.
	ExternalIPRoutes []ExternalIPRoute
}

// ControlPlane is the member that runs the API server and the controllers: a
// namespace on the node network, as a control-plane machine of a cluster is.
type ControlPlane struct {
	Name string
	// IP is its address on the node network: the first one free in nodeCIDR.
	IP netip.Addr
}

// ControlPlaneMember is the control plane's member name, reserved in labs that
// have one.
const ControlPlaneMember = "control-plane"

// Node is a validated NodeSpec.
type Node struct {
	Name    string
	IP      netip.Addr
	PodCIDR netip.Prefix
	// IP6 and PodCIDR6 are the node's IPv6 address and podCIDR, valid in a
	// dual-stack lab only.
	IP6      netip.Addr
	PodCIDR6 netip.Prefix
}

// Gateway is the node's address on cni0 and its pods' default gateway: the first
// address of the podCIDR, as the bridge CNI plugin's host-local IPAM assigns it.
func (n Node) Gateway() netip.Addr { return n.PodCIDR.Masked().Addr().Next() }

// Gateway6 is Gateway in the IPv6 podCIDR; not valid when the node has none.
func (n Node) Gateway6() netip.Addr {
	if !n.PodCIDR6.IsValid() {
		return netip.Addr{}
	}
	return n.PodCIDR6.Masked().Addr().Next()
}

// DualStack tells whether the lab has IPv6 beside IPv4.
func (t *Topology) DualStack() bool { return t.ClusterCIDR6.IsValid() }

// Pod is a validated PodSpec.
type Pod struct {
	Name      string
	Namespace string
	Node      string
	IP        netip.Addr
	// IP6 is the pod's IPv6 address, valid when its node has an IPv6 podCIDR.
	IP6         netip.Addr
	Labels      map[string]string
	Ready       bool
	Terminating bool
	Ports       []corev1.ContainerPort
	// Component names the cluster component the pod runs instead of svclab's
	// servers (ComponentCoreDNS); empty for the lab's own pods.
	Component string
}

// Key is "namespace/name", unique in a lab.
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// Client is a validated ClientSpec.
type Client struct {
	Name string
	IP   netip.Addr
	// IP6 is the client's IPv6 address, when the file gives it one.
	IP6 netip.Addr
}
