package doctor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/vm"
)

// Where a mode can run.
const (
	Native  = "native"
	InVM    = "vm"
	Nowhere = "none"
	// CannotTell: whether it runs natively was not found out (no probe).
	CannotTell = "unknown"
)

// ModeVerdict says where one proxy mode can run on this host.
type ModeVerdict struct {
	Mode  string `json:"mode"`
	Where string `json:"where"`
	// Why is, for "vm", what keeps the mode from running natively; for "none",
	// everything missing with how to get it; for "native", what was not probed.
	Why string `json:"why,omitempty"`
}

func (v ModeVerdict) String() string {
	switch v.Where {
	case Native:
		if v.Why != "" {
			return "native (" + v.Why + ")"
		}
		return "native"
	case InVM:
		return "in the VM: " + v.Why
	case CannotTell:
		return "cannot tell: " + v.Why
	default:
		return "cannot run: " + v.Why
	}
}

// modeNeeds is what the verdict on one mode depends on.
type modeNeeds struct {
	name   string
	kernel []string // its Mode.Kernel
	// available is its Mode.Available() here: the programs it runs, and what
	// the mode checks of the kernel itself.
	available error
}

// registeredModes reads every mode from the registry, so a new mode is judged
// without doctor knowing it.
func registeredModes() []modeNeeds {
	var out []modeNeeds
	for _, name := range proxy.Modes() {
		m, err := proxy.Lookup(name)
		if err != nil {
			continue
		}
		out = append(out, modeNeeds{name: name, kernel: m.Kernel, available: m.Available()})
	}
	return out
}

// decide says where a mode runs: natively when the kernel has every feature
// it and every lab need (as far as they were probed) and the mode's own check
// passes; else in svclab's VM, whose Debian kernel has them all, when the host
// has what the VM needs (vmMissing empty); else nowhere, naming all that is
// missing and how to get it.
func decide(m modeNeeds, features map[string]Feature, vmMissing []vm.Missing) ModeVerdict {
	var lacks []Feature
	var unprobed []string
	for _, name := range append(append([]string(nil), labFeatures...), m.kernel...) {
		f, ok := features[name]
		switch {
		case !ok:
			unprobed = append(unprobed, name+" (doctor has no probe for it)")
		case f.State == Missing:
			lacks = append(lacks, f)
		case f.State == Unknown:
			unprobed = append(unprobed, name)
		}
	}
	// A check that needs root tells nothing without it, as an unprobed feature.
	if errors.Is(m.available, proxy.ErrNeedsRoot) {
		unprobed = append(unprobed, m.available.Error())
		m.available = nil
	}
	if len(lacks) == 0 && m.available == nil {
		v := ModeVerdict{Mode: m.name, Where: Native}
		switch n := len(unprobed); {
		case n > 3:
			v.Why = fmt.Sprintf("unverified: %d kernel features it needs were not probed", n)
		case n > 0:
			v.Why = "unverified: not probed: " + strings.Join(unprobed, ", ")
		}
		return v
	}
	var notNative, fixes []string
	if len(lacks) > 0 {
		var names []string
		for _, f := range lacks {
			names = append(names, f.Name+" ("+f.What+")")
			fixes = append(fixes, f.Name+" ("+f.Fix+")")
		}
		notNative = append(notNative, "this kernel lacks "+strings.Join(names, ", "))
	} else {
		notNative = append(notNative, m.available.Error())
		fixes = append(fixes, m.available.Error())
	}
	if len(vmMissing) == 0 {
		return ModeVerdict{Mode: m.name, Where: InVM, Why: strings.Join(notNative, "; ")}
	}
	var vmNeeds []string
	for _, miss := range vmMissing {
		vmNeeds = append(vmNeeds, miss.String())
	}
	return ModeVerdict{Mode: m.name, Where: Nowhere,
		Why: strings.Join(fixes, ", ") + "; svclab's VM needs " + strings.Join(vmNeeds, ", ")}
}
