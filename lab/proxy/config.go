package proxy

import (
	"fmt"
	"net/netip"
	"strings"
)

// Config is how one node's proxy is configured: kube-proxy's own configuration
// (the fields svclab's proxiers read of it), and svclab's settings that kube-proxy
// does not have.
type Config struct {
	// KubeProxy is kube-proxy's configuration file, as svclab's proxiers read it.
	KubeProxy KubeProxyConfiguration
	// Version is the kube-proxy release whose rules svclab's proxiers reproduce.
	Version Version
	// ServiceCIDR is the cluster's service range (the API server's
	// --service-cluster-ip-range, which kube-proxy learns from the ServiceCIDR
	// objects).
	ServiceCIDR netip.Prefix
	// Backend is the xtables backend the rules are written with: "nft" (the
	// default) or "legacy" (see xtables.Backends).
	Backend string
	// Method is how svclab's proxier writes a change, one of its mode's Methods;
	// empty means what the mode's kube-proxy release does.
	Method string
	// NoConntrackCleanup turns off deleting stale UDP conntrack entries after a
	// sync, to show what happens without it.
	NoConntrackCleanup bool
}

// ClusterCIDR is the first range of kube-proxy's clusterCIDR (svclab's labs are
// IPv4 only); invalid when unset, and then kube-proxy cannot tell pod traffic
// from the rest by its source.
func (c Config) ClusterCIDR() netip.Prefix {
	first, _, _ := strings.Cut(c.KubeProxy.ClusterCIDR, ",")
	p, err := netip.ParsePrefix(strings.TrimSpace(first))
	if err != nil {
		return netip.Prefix{}
	}
	return p.Masked()
}

// MasqueradeAll is kube-proxy's --masquerade-all, read from the section of the
// mode that reads it (iptables and IPVS modes read the iptables section).
func (c Config) MasqueradeAll() bool {
	return c.KubeProxy.IPTables.MasqueradeAll
}

// VersionOr is c.Version, or DefaultVersion when it is unset.
func (c Config) VersionOr() Version {
	if c.Version == (Version{}) {
		return DefaultVersion
	}
	return c.Version
}

// Validate checks the fields svclab's proxiers read, naming the field that is
// wrong as the configuration file spells it.
func (c Config) Validate() error {
	k := c.KubeProxy
	if k.ClusterCIDR != "" && !c.ClusterCIDR().IsValid() {
		return fmt.Errorf("clusterCIDR %q: not an IPv4 CIDR", k.ClusterCIDR)
	}
	switch k.DetectLocalMode {
	case "", LocalModeClusterCIDR, LocalModeNodeCIDR:
	case LocalModeBridgeInterface:
		if k.DetectLocal.BridgeInterface == "" {
			return fmt.Errorf("detectLocalMode %s needs detectLocal.bridgeInterface", k.DetectLocalMode)
		}
	case LocalModeInterfaceNamePrefix:
		if k.DetectLocal.InterfaceNamePrefix == "" {
			return fmt.Errorf("detectLocalMode %s needs detectLocal.interfaceNamePrefix", k.DetectLocalMode)
		}
	default:
		return fmt.Errorf("detectLocalMode %q: want %s, %s, %s or %s", k.DetectLocalMode,
			LocalModeClusterCIDR, LocalModeNodeCIDR, LocalModeBridgeInterface, LocalModeInterfaceNamePrefix)
	}
	for i, a := range k.NodePortAddresses {
		if a == NodePortAddressesPrimary {
			continue
		}
		if _, err := netip.ParsePrefix(a); err != nil {
			return fmt.Errorf("nodePortAddresses[%d] %q: want a CIDR or %q", i, a, NodePortAddressesPrimary)
		}
	}
	return nil
}
