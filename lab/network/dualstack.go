package network

import "github.com/svclab/svclab/lab/namespaces"

// Sysctls of a dual-stack lab's members that have IPv6. IPv6 stays on, and no
// address waits for duplicate address detection: the lab hands out each
// address once (addAddr also asks for none, IFA_F_NODAD; accept_dad=0 covers
// the link-local addresses the kernel makes itself). Pods get no sysctl: their
// eth0 has no link-local address (silenceIPv6) and their addresses come with
// IFA_F_NODAD, so nothing of theirs waits, and a write costs (see noIPv6).
var (
	dualStackSysctls = []namespaces.Setting{
		{Key: "net.ipv6.conf.all.accept_dad", Value: "0"},
		{Key: "net.ipv6.conf.default.accept_dad", Value: "0"},
	}
	// The fabric's bridge has no address of either family; its namespace keeps
	// IPv6 off, and bridged IPv6 frames skip netfilter as IPv4 ones do.
	fabricDualStackSysctls = append(fabricSysctls[:len(fabricSysctls):len(fabricSysctls)],
		namespaces.Setting{Key: "net.bridge.bridge-nf-call-ip6tables", Value: "0"})
	// A node routes IPv6 for its pods too, and bridged IPv6 frames between its
	// pods go through ip6tables for the reason IPv4 ones go through iptables.
	nodeDualStackSysctls = append(dualStackSysctls[:len(dualStackSysctls):len(dualStackSysctls)],
		namespaces.Setting{Key: "net.ipv4.ip_forward", Value: "1"},
		namespaces.Setting{Key: "net.ipv6.conf.all.forwarding", Value: "1"},
		namespaces.Setting{Key: "net.bridge.bridge-nf-call-iptables", Value: "1"},
		namespaces.Setting{Key: "net.bridge.bridge-nf-call-ip6tables", Value: "1"})
)
