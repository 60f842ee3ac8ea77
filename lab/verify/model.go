package verify

import (
	"fmt"
	"net/netip"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/version"
)

// ModelOf is the dataplane model verify applies to the proxy mode called mode,
// as the mode's registration says.
func ModelOf(mode string) (proxy.Model, error) {
	m, err := proxy.Lookup(mode)
	if err != nil {
		return 0, fmt.Errorf("verify: %w", err)
	}
	if _, ok := semanticsOf(m.Dataplane.Model); !ok {
		return 0, fmt.Errorf("verify: no expectations are defined for mode %s's %v", mode, m.Dataplane.Model)
	}
	return m.Dataplane.Model, nil
}

// semantics is what a model knows of one dataplane; expect (expect.go) frames each
// flow and asks it the rest.
type semantics interface {
	// view is the Service port as the mode's proxier at kube-proxy release v
	// programs it.
	view(sp proxy.ServicePort, v version.Version) proxy.ServicePort
	// choose says what the translating node does with the flow: which endpoints
	// its rules may pick and whether the flow is masqueraded, or that nothing
	// answers.
	choose(m *model, f flowAt) choice
	// hairpinMasqueraded tells whether a pod reaching itself through the Service
	// is masqueraded, local telling whether it runs on the translating node;
	// otherwise its own replies bypass the translation and are lost.
	hairpinMasqueraded(local bool) bool
	// lost is the reason given when replies of some endpoints the rules pick
	// bypass d, the node that translated the request.
	lost(d string) string
	// replyAddr is the source address an unmasqueraded flow from src to tgt
	// carries, the one its endpoints see and reply to; localOnly tells that
	// only endpoints on the translating node can answer it (replies to an
	// address every node holds end at the endpoint's own node).
	replyAddr(src Source, tgt Target) (addr netip.Addr, localOnly bool)
	// dataplane is the model of kube-proxy's rules these semantics are.
	dataplane() proxy.Model
	// firewalled is the reason a load balancer IP's firewall drops a flow
	// from src that carries the source address addr.
	firewalled(src Source, addr netip.Addr) string
	// refusedBeforeFirewall tells whether a flow from src to a load balancer
	// IP whose translating node refuses it (no endpoint) is refused before the
	// firewall sees it, firewalled or not.
	refusedBeforeFirewall(src Source) bool
}

// semanticsOf is what verify knows of model m.
func semanticsOf(m proxy.Model) (semantics, bool) {
	switch m {
	case proxy.ModelIPTables:
		return iptablesRules{}, true
	case proxy.ModelNFTables:
		return nftablesRules{}, true
	case proxy.ModelIPVS:
		return ipvsRules{}, true
	}
	return nil, false
}

// mustSemantics is semanticsOf for a model ModelOf gave.
func mustSemantics(m proxy.Model) semantics {
	s, ok := semanticsOf(m)
	if !ok {
		panic(fmt.Sprintf("verify: no semantics for the %v", m))
	}
	return s
}
