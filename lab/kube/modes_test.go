package kube

// The modes register themselves; kube-proxy's configuration is checked against
// the registry.
import (
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"
	_ "github.com/svclab/svclab/lab/proxy/nftables"
)
