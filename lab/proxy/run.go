package proxy

import (
	"fmt"
	"strings"
)

// KubeProxyPrefix labels a run of the real kube-proxy: "kube-proxy-nftables".
const KubeProxyPrefix = "kube-proxy-"

// Run is one case that verify, the specs and the bench run: a mode in one of
// its variants, programmed by svclab's own proxier or by the real kube-proxy.
type Run struct {
	Mode      Mode
	Variant   Variant
	KubeProxy bool
}

// Label names the run as reports and SVCLAB_MODES do: "iptables-nft",
// "kube-proxy-iptables-legacy".
func (r Run) Label() string {
	l := r.Mode.Label(r.Variant)
	if r.KubeProxy {
		return KubeProxyPrefix + l
	}
	return l
}

// Config is the proxy configuration the run's variant sets.
func (r Run) Config() Config { return Config{Backend: r.Variant.Backend} }

// Runs are every registered mode in every variant, as kube-proxy runs them
// when kubeProxy is set, else as svclab's proxiers do (modes without one of
// theirs are left out).
func Runs(kubeProxy bool) []Run {
	var out []Run
	for _, name := range Modes() {
		m, _ := Lookup(name)
		if !kubeProxy && m.HasProxier() != nil {
			continue
		}
		variants := m.Variants
		if len(variants) == 0 {
			variants = []Variant{{}}
		}
		for _, v := range variants {
			out = append(out, Run{Mode: m, Variant: v, KubeProxy: kubeProxy})
		}
	}
	return out
}

// ParseRun reads a run's label. A mode only the real kube-proxy runs, given
// without the prefix, is an error that says how to list it.
func ParseRun(label string) (Run, error) {
	label = strings.TrimSpace(label)
	var known []string
	for _, kp := range []bool{false, true} {
		for _, r := range Runs(kp) {
			if r.Label() == label {
				return r, nil
			}
			known = append(known, r.Label())
		}
	}
	for _, r := range Runs(true) {
		if r.Mode.Label(r.Variant) == label {
			return Run{}, fmt.Errorf("%w: list it as %s", r.Mode.HasProxier(), r.Label())
		}
	}
	return Run{}, fmt.Errorf("unknown mode %q (known: %s)", label, strings.Join(known, ", "))
}

// VariantNames are the names of m's variants, in order.
func (m Mode) VariantNames() []string {
	names := make([]string, len(m.Variants))
	for i, v := range m.Variants {
		names[i] = v.Name
	}
	return names
}
