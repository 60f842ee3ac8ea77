package verify

// nftablesRules is kube-proxy's nftables mode: its dispatch is one table of
// verdict maps instead of chains, and for every flow verify plans it does what
// the iptables mode does, with one difference the kernel showed.
type nftablesRules struct{ iptablesRules }

// hairpinMasqueraded: a pod reaching itself is masqueraded by the
// hairpin-connections set, which holds the node's own endpoints only (1.37's
// syncProxyRules adds an endpoint to it only when it is local). A pod that
// dials another node's NodePort with policy Local is short-circuited there to
// any endpoint, itself included, and that node does not masquerade it: its
// replies to itself bypass that node and are lost. (The iptables mode marks
// every endpoint's own traffic in its KUBE-SEP chain, on every node.)
func (nftablesRules) hairpinMasqueraded(local bool) bool { return local }
