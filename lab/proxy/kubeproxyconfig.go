package proxy

// KubeProxyConfiguration is the part of kube-proxy's configuration file
// (kubeproxy.config.k8s.io/v1alpha1, KubeProxyConfiguration) that shapes the
// rules, with kube-proxy's own field names. svclab does not import
// k8s.io/kube-proxy's type for it: that package pulls in component-base's logging
// and metrics (about 200 packages) for fields a lab never sets.
type KubeProxyConfiguration struct {
	// Mode is kube-proxy's --proxy-mode: iptables, ipvs or nftables.
	Mode string `json:"mode"`
	// ClusterCIDR is the pods' range(s), comma-separated; with detectLocalMode
	// ClusterCIDR it tells pod traffic from the rest.
	ClusterCIDR string `json:"clusterCIDR"`
	// NodePortAddresses are the CIDRs whose node addresses accept NodePorts, or
	// "primary" (the node's InternalIPs). Empty: every local address.
	NodePortAddresses []string `json:"nodePortAddresses,omitempty"`
	// DetectLocalMode is how traffic from local pods is told apart:
	// ClusterCIDR (the default), NodeCIDR, BridgeInterface or InterfaceNamePrefix.
	DetectLocalMode string                   `json:"detectLocalMode,omitempty"`
	DetectLocal     DetectLocalConfiguration `json:"detectLocal"`
	IPTables        IPTablesConfiguration    `json:"iptables"`
	IPVS            IPVSConfiguration        `json:"ipvs"`
	NFTables        NFTablesConfiguration    `json:"nftables"`
}

// DetectLocalConfiguration holds the arguments of the detect-local modes.
type DetectLocalConfiguration struct {
	BridgeInterface     string `json:"bridgeInterface,omitempty"`
	InterfaceNamePrefix string `json:"interfaceNamePrefix,omitempty"`
}

// IPTablesConfiguration is the iptables section, which the IPVS mode reads too.
type IPTablesConfiguration struct {
	MasqueradeAll bool `json:"masqueradeAll"`
	// LocalhostNodePorts lets NodePorts answer on 127.0.0.1 (route_localnet);
	// nil means kube-proxy's default, true.
	LocalhostNodePorts *bool `json:"localhostNodePorts,omitempty"`
}

// IPVSConfiguration is the IPVS section.
type IPVSConfiguration struct {
	// Scheduler is the IPVS scheduler; empty means rr.
	Scheduler string `json:"scheduler,omitempty"`
}

// NFTablesConfiguration is the nftables section.
type NFTablesConfiguration struct {
	MasqueradeAll bool `json:"masqueradeAll"`
}

// Sections of the configuration, which Mode.Section names.
const (
	SectionIPTables = "iptables"
	SectionIPVS     = "ipvs"
	SectionNFTables = "nftables"
)

// Values of detectLocalMode.
const (
	LocalModeClusterCIDR         = "ClusterCIDR"
	LocalModeNodeCIDR            = "NodeCIDR"
	LocalModeBridgeInterface     = "BridgeInterface"
	LocalModeInterfaceNamePrefix = "InterfaceNamePrefix"
)

// NodePortAddressesPrimary is the nodePortAddresses value for the node's own
// InternalIPs.
const NodePortAddressesPrimary = "primary"

// LocalhostNodePorts is iptables.localhostNodePorts with kube-proxy's default.
func (k KubeProxyConfiguration) LocalhostNodePorts() bool {
	return k.IPTables.LocalhostNodePorts == nil || *k.IPTables.LocalhostNodePorts
}
