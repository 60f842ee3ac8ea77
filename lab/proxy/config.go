package proxy

import (
	"errors"
	"slices"

	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/version"
)

// Config is how one node's proxy is configured: kube-proxy's own configuration
// (the fields svclab's proxiers read of it), and svclab's settings that kube-proxy
// does not have.
type Config struct {
	// KubeProxy is kube-proxy's configuration file (its own type, read as
	// strictly as kube-proxy reads it); Validate says which of its fields
	// svclab's proxiers implement.
	KubeProxy kubeproxyconfig.KubeProxyConfiguration
	// Version is the kube-proxy release whose rules svclab's proxiers reproduce.
	Version version.Version
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
	// ClusterCIDRGiven tells that the user's configuration names clusterCIDR,
	// even empty (kube-proxy then has no ClusterCIDR local-traffic detector):
	// the topology's clusterCIDR does not fill it in.
	ClusterCIDRGiven bool
	// NoConntrackCleanup turns off deleting stale UDP conntrack entries after a
	// sync, to show what happens without it.
	NoConntrackCleanup bool
	// Family is the IP family the proxier programs: kube-proxy runs one
	// proxier per family (its meta-proxier holds both in a dual-stack
	// cluster). Empty is IPv4 (see IPFamily).
	Family corev1.IPFamily
}

// ClusterCIDR is the first range of kube-proxy's clusterCIDR (the IPv4 one in
// svclab's labs; ClusterCIDRFor picks a family's); invalid when unset, and then
// kube-proxy cannot tell pod traffic from the rest by its source.
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

// VersionOr is c.Version, or version.Default when it is unset.
func (c Config) VersionOr() version.Version {
	if c.Version == (version.Version{}) {
		return version.Default
	}
	return c.Version
}

// Sections of kube-proxy's configuration, which Mode.Section names.
const (
	SectionIPTables = "iptables"
	SectionIPVS     = "ipvs"
	SectionNFTables = "nftables"
)

// Validate checks the fields svclab's proxiers read, naming the field that is
// wrong as the configuration file spells it, and refuses settings that would
// change kube-proxy's rules in ways svclab's proxiers do not reproduce: the real
// kube-proxy (--proxy kube-proxy) takes them all. section is the mode's section
// of the configuration (Mode.Section), which says which proxier will read it.
func (c Config) Validate(section string) error {
	k := c.KubeProxy
	if err := checkFamily(c.Family); err != nil {
		return err
	}
	if k.ClusterCIDR != "" && !c.ClusterCIDR().IsValid() {
		return fmt.Errorf("clusterCIDR %q: not an IPv4 CIDR", k.ClusterCIDR)
	}
	// kube-proxy's own validation: the interface modes need their name.
	m := string(k.DetectLocalMode)
	switch m {
	case "", LocalModeClusterCIDR, LocalModeNodeCIDR:
	case LocalModeBridgeInterface:
		if k.DetectLocal.BridgeInterface == "" {
			return fmt.Errorf("detectLocal.bridgeInterface: must be set with detectLocalMode %s", m)
		}
	case LocalModeInterfaceNamePrefix:
		if k.DetectLocal.InterfaceNamePrefix == "" {
			return fmt.Errorf("detectLocal.interfaceNamePrefix: must be set with detectLocalMode %s", m)
		}
	default:
		return fmt.Errorf("detectLocalMode %q: want %s, %s, %s or %s", m,
			LocalModeClusterCIDR, LocalModeNodeCIDR, LocalModeBridgeInterface, LocalModeInterfaceNamePrefix)
	}
	if m != "" && m != LocalModeClusterCIDR {
		// svclab's iptables proxier writes every detector since the 1.24 layout;
		// verify's IPVS model tells pods apart by clusterCIDR only, so svclab's
		// IPVS proxier does not take the other detectors yet.
		if section == SectionIPVS {
			return fmt.Errorf("detectLocalMode %s: %w in ipvs mode", m, errNotReproduced)
		}
		if v := c.VersionOr(); !v.AtLeast(1, 24) {
			return fmt.Errorf("detectLocalMode %s: %w for kube-proxy %s (they do for 1.24 and later)", m, errNotReproduced, v)
		}
	}
	if err := CheckConntrackMax(k.Conntrack.MaxPerCore); err != nil {
		return fmt.Errorf("conntrack.maxPerCore: %w", err)
	}
	if len(k.NodePortAddresses) > 0 {
		return fmt.Errorf("nodePortAddresses: %w", errNotReproduced)
	}
	if v := c.VersionOr(); !c.LocalhostNodePorts() && section == SectionIPTables && !v.AtLeast(1, 27) {
		// Before 1.27 the kubelet, not kube-proxy, kept the localnet rule.
		return fmt.Errorf("iptables.localhostNodePorts false: %w for kube-proxy %s (they do for 1.27 and later)", errNotReproduced, v)
	}
	return nil
}

// errNotReproduced says that a setting is kube-proxy's but svclab's proxiers do
// not write its rules.
var errNotReproduced = errors.New("svclab's own proxiers do not reproduce it; the real kube-proxy does (--proxy kube-proxy)")

// fieldsRead are the KubeProxyConfiguration fields (dotted paths) svclab's
// proxiers read; rulesUnaffected starts the paths of fields that leave the rules
// kube-proxy writes alone (its API connection, logging, its own servers, its
// sync loop), which svclab's proxiers may leave unread. svclab's proxiers set
// the conntrack sysctls as kube-proxy does (Config.ConntrackSysctls).
var (
	fieldsRead = []string{
		"apiVersion", "kind", "mode", "clusterCIDR", "detectLocalMode", "detectLocal.bridgeInterface", "detectLocal.interfaceNamePrefix", "nodePortAddresses",
		"iptables.masqueradeAll", "iptables.localhostNodePorts", "nftables.masqueradeAll", "ipvs.scheduler",
		"conntrack.maxPerCore", "conntrack.min", "conntrack.tcpEstablishedTimeout", "conntrack.tcpCloseWaitTimeout",
		"conntrack.tcpBeLiberal", "conntrack.udpTimeout", "conntrack.udpStreamTimeout",
	}
	rulesUnaffected = []string{
		"clientConnection.", "logging.", "featureGates", "hostnameOverride", "bindAddress", "healthzBindAddress",
		"metricsBindAddress", "bindAddressHardFail", "enableProfiling", "showHiddenMetricsForVersion",
		"oomScoreAdj", "configSyncPeriod", "iptables.syncPeriod", "iptables.minSyncPeriod",
		"ipvs.syncPeriod", "ipvs.minSyncPeriod", "nftables.syncPeriod", "nftables.minSyncPeriod",
	}
)

// CheckFields tells whether svclab's proxiers can honour a configuration file
// that sets the given fields (dotted paths), naming the first they cannot.
func CheckFields(paths []string) error {
	for _, p := range paths {
		if slices.Contains(fieldsRead, p) {
			continue
		}
		if slices.ContainsFunc(rulesUnaffected, func(prefix string) bool { return strings.HasPrefix(p, prefix) }) {
			continue
		}
		return fmt.Errorf("%s: %w", p, errNotReproduced)
	}
	return nil
}
