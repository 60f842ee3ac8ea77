package verify

// The modes register themselves; verify's tests read them from the registry.
import (
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"
	_ "github.com/svclab/svclab/lab/proxy/nftables"
)
