package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/svclab/svclab/lab/proxy"
)

// The bench asks the registry what to measure: every mode with a proxier of its
// own, its variants and its methods. It names none.

// Measured is one mode as a run measures it: the variants and methods of it the
// configuration selects, in the configuration's order.
type Measured struct {
	Mode proxy.Mode
	// Variants has one zero Variant for a mode without variants.
	Variants []proxy.Variant
	Methods  []string
}

// unnamedMethod labels the rows of a mode whose proxier has a single, unnamed
// way of writing (no Methods).
const unnamedMethod = "sync"

// BareMethod labels the rows of a bare apply by the mode's own program
// (proxy.BareApplier) set beside svclab's cold sync.
const BareMethod = "bare-restore"

// Measured resolves c's modes, methods and backends through the registry.
func (c Config) Measured() ([]Measured, error) {
	var out []Measured
	for _, name := range c.Modes {
		m, err := proxy.Lookup(name)
		if err != nil {
			return nil, err
		}
		if m.New == nil {
			return nil, fmt.Errorf("mode %s: svclab has no proxier of its own to measure", name)
		}
		me := Measured{Mode: m}
		for _, method := range c.Methods {
			if slices.Contains(m.Methods, method) {
				me.Methods = append(me.Methods, method)
			}
		}
		if len(me.Methods) == 0 {
			me.Methods = defaultMethods([]string{name})
		}
		if len(me.Methods) == 0 {
			me.Methods = []string{unnamedMethod}
		}
		for _, b := range c.Backends {
			if i := slices.IndexFunc(m.Variants, func(v proxy.Variant) bool { return v.Name == b }); i >= 0 {
				me.Variants = append(me.Variants, m.Variants[i])
			}
		}
		if len(me.Variants) == 0 {
			me.Variants = []proxy.Variant{{}}
			if len(m.Variants) > 0 {
				me.Variants[0] = m.Variants[0]
			}
		}
		out = append(out, me)
	}
	return out, nil
}

// Subjects are the mode, method and variant of every line a run of c draws,
// in reading order: modes as given, then variants, then methods.
func (c Config) Subjects() ([]Subject, error) {
	measured, err := c.Measured()
	if err != nil {
		return nil, err
	}
	var out []Subject
	for _, me := range measured {
		for _, v := range me.Variants {
			for _, method := range me.Methods {
				out = append(out, Subject{me.Mode.Name, method, v.Name})
			}
		}
	}
	return out, nil
}

// SetModes narrows c to modes: the methods and backends listed that none of
// them has go (the part of a run on this kernel, when the others run in the
// VM).
func (c *Config) SetModes(modes []string) {
	c.Modes = modes
	keep := func(list []string, of func(proxy.Mode) []string) []string {
		var out []string
		for _, x := range list {
			for _, name := range modes {
				if m, err := proxy.Lookup(name); err == nil && slices.Contains(of(m), x) {
					out = append(out, x)
					break
				}
			}
		}
		return out
	}
	c.Methods = keep(c.Methods, func(m proxy.Mode) []string { return m.Methods })
	c.Backends = keep(c.Backends, proxy.Mode.VariantNames)
}

// unclaimed are errors for the items of list (methods or backends) that no
// measured mode has.
func unclaimed(what string, list []string, measured []Measured, of func(proxy.Mode) []string) []error {
	var errs []error
	for _, x := range list {
		var has []string
		claimed := false
		for _, me := range measured {
			claimed = claimed || slices.Contains(of(me.Mode), x)
			if items := of(me.Mode); len(items) > 0 {
				has = append(has, me.Mode.Name+": "+strings.Join(items, ", "))
			}
		}
		if claimed {
			continue
		}
		if len(has) == 0 {
			errs = append(errs, fmt.Errorf("%s %q: no mode measured has any %s", what, x, what))
			continue
		}
		errs = append(errs, fmt.Errorf("%s %q: no mode measured has it (%s)", what, x, strings.Join(has, "; ")))
	}
	return errs
}

// measurableModes are the registered modes with a proxier of their own.
func measurableModes() []string {
	var out []string
	for _, name := range proxy.Modes() {
		if m, err := proxy.Lookup(name); err == nil && m.New != nil {
			out = append(out, name)
		}
	}
	return out
}

// eachMode collects pick's items over modes, each once, in order.
func eachMode(modes []string, pick func(proxy.Mode) []string) []string {
	var out []string
	for _, name := range modes {
		m, err := proxy.Lookup(name)
		if err != nil {
			continue
		}
		for _, x := range pick(m) {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out
}

func allMethods(modes []string) []string {
	return eachMode(modes, func(m proxy.Mode) []string { return m.Methods })
}

func allVariants(modes []string) []string { return eachMode(modes, proxy.Mode.VariantNames) }

// defaultMethods are each mode's default method, its first.
func defaultMethods(modes []string) []string {
	return eachMode(modes, func(m proxy.Mode) []string { return m.Methods[:min(1, len(m.Methods))] })
}

func firstVariants(modes []string) []string {
	return eachMode(modes, func(m proxy.Mode) []string { return m.VariantNames()[:min(1, len(m.Variants))] })
}

// KubeProxySubjects are the lines of the real kube-proxy a run of c draws:
// each of KubeProxyModes in the variants of it Backends lists (else its
// first).
func (c Config) KubeProxySubjects() ([]Subject, error) {
	var out []Subject
	for _, name := range c.KubeProxyModes {
		m, err := proxy.Lookup(name)
		if err != nil {
			return nil, err
		}
		var vs []string
		for _, b := range c.Backends {
			if slices.Contains(m.VariantNames(), b) {
				vs = append(vs, b)
			}
		}
		if len(vs) == 0 {
			vs = m.VariantNames()[:min(1, len(m.Variants))]
		}
		if len(vs) == 0 {
			vs = []string{""}
		}
		for _, v := range vs {
			out = append(out, Subject{Mode: m.Name, Method: KubeProxyMethod, Backend: v})
		}
	}
	return out, nil
}

// variantNamed is m's variant of that name; the zero Variant (the mode's
// default backend) when it has none of that name.
func variantNamed(m proxy.Mode, name string) proxy.Variant {
	for _, v := range m.Variants {
		if v.Name == name {
			return v
		}
	}
	return proxy.Variant{}
}
