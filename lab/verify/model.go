package verify

import (
	"fmt"

	"github.com/svclab/svclab/lab/proxy"
)

// Model is the dataplane semantics verify applies to a proxy mode: what its rules
// do with a flow, and how it picks backends.
type Model int

const (
	// IPTables is kube-proxy's iptables mode: NAT chains picking an endpoint at
	// random for every new connection (expect_iptables.go).
	IPTables Model = iota + 1
	// IPVS is kube-proxy's IPVS mode: a virtual server per Service address on every
	// node, whose scheduler keeps one rotation shared by every client
	// (expect_ipvs.go).
	IPVS
)

func (m Model) String() string {
	switch m {
	case IPTables:
		return "iptables model"
	case IPVS:
		return "IPVS model"
	}
	return fmt.Sprintf("Model(%d)", int(m))
}

// modeModels gives each proxy mode the semantics verify applies to it. It is the one
// place mode names meet models, until modes carry their own.
var modeModels = map[string]Model{
	"iptables": IPTables,
	"ipvs":     IPVS,
}

// ModelOf is the semantics verify applies to the proxy mode called mode.
func ModelOf(mode string) (Model, error) {
	m, ok := modeModels[mode]
	if !ok {
		return 0, fmt.Errorf("verify: no expectations are defined for mode %q", mode)
	}
	return m, nil
}

// semantics is what a model knows of one dataplane; expect (expect.go) frames each
// flow and asks it the rest.
type semantics interface {
	// view is the Service port as the mode's proxier at kube-proxy release v
	// programs it.
	view(sp proxy.ServicePort, v proxy.Version) proxy.ServicePort
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
	// sharedScheduler is set when one scheduler per virtual server picks the
	// backends of every client's connections, so flows through one virtual server
	// must run one after another: two side by side could alternate in step and
	// each see one backend only. Random picks per connection need no such care.
	sharedScheduler() bool
}

func (m Model) semantics() semantics {
	switch m {
	case IPTables:
		return iptablesRules{}
	case IPVS:
		return ipvsRules{}
	}
	panic(fmt.Sprintf("verify: %v has no semantics", m))
}
