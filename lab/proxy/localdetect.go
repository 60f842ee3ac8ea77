package proxy

// Values of kube-proxy's detectLocalMode (the configuration type's package names
// none of them).
const (
	LocalModeClusterCIDR         = "ClusterCIDR"
	LocalModeNodeCIDR            = "NodeCIDR"
	LocalModeBridgeInterface     = "BridgeInterface"
	LocalModeInterfaceNamePrefix = "InterfaceNamePrefix"
)

// LocalDetector is kube-proxy's local-traffic detector (pkg/proxy/util of 1.37)
// as iptables matches: what tells a packet from one of the node's pods from the
// rest. kube-proxy masquerades traffic to a ClusterIP that is not local, and
// sends local traffic to an external address of a Local-policy Service on to its
// Cluster chain; without a detector (ClusterCIDR mode with no clusterCIDR, NodeCIDR
// with a node that has no podCIDR, an unknown mode) it writes neither rule.
type LocalDetector struct {
	ifLocal, ifNotLocal []string
}

// Implemented tells whether kube-proxy has a detector at all.
func (d LocalDetector) Implemented() bool { return len(d.ifLocal) > 0 }

// IfLocal are the match arguments of traffic from a local pod.
func (d LocalDetector) IfLocal() []string { return d.ifLocal }

// IfNotLocal are the match arguments of the rest.
func (d LocalDetector) IfNotLocal() []string { return d.ifNotLocal }

// LocalDetector is the detector kube-proxy configured with c builds on node n
// for c's family: a source range (the first clusterCIDR of the family, or the
// node's podCIDR when it is of the family), or the interface a packet came in
// by (a bridge's name, or a name prefix, which iptables writes with a trailing
// "+"), the same for both families (getLocalDetectors in
// cmd/kube-proxy/app/server_linux.go). n is the node as c's family sees it: its
// address and podCIDR of that family.
func (c Config) LocalDetector(n Node) LocalDetector {
	k := c.KubeProxy
	bySource := func(s string) LocalDetector {
		return LocalDetector{ifLocal: []string{"-s", s}, ifNotLocal: []string{"!", "-s", s}}
	}
	byInterface := func(i string) LocalDetector {
		return LocalDetector{ifLocal: []string{"-i", i}, ifNotLocal: []string{"!", "-i", i}}
	}
	switch string(k.DetectLocalMode) {
	case "", LocalModeClusterCIDR:
		if p := c.ClusterCIDRFor(c.IPFamily()); p.IsValid() {
			return bySource(p.String())
		}
	case LocalModeNodeCIDR:
		if n.PodCIDR.IsValid() && FamilyOf(n.PodCIDR.Addr()) == c.IPFamily() {
			return bySource(n.PodCIDR.Masked().String())
		}
	case LocalModeBridgeInterface:
		if k.DetectLocal.BridgeInterface != "" {
			return byInterface(k.DetectLocal.BridgeInterface)
		}
	case LocalModeInterfaceNamePrefix:
		if k.DetectLocal.InterfaceNamePrefix != "" {
			return byInterface(k.DetectLocal.InterfaceNamePrefix + "+")
		}
	}
	return LocalDetector{}
}

// LocalhostNodePorts is kube-proxy's iptables.localhostNodePorts as its iptables
// proxier applies it: on by default, and off whatever the setting when
// nodePortAddresses leaves out 127.0.0.1 (svclab's proxiers take no
// nodePortAddresses, so that case does not arise for them).
func (c Config) LocalhostNodePorts() bool {
	p := c.KubeProxy.IPTables.LocalhostNodePorts
	return p == nil || *p
}
