package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"
	"github.com/svclab/svclab/vm"
)

// allPresent answers every feature doctor knows with present, but the given
// ones with their state.
func allPresent(states map[string]string) map[string]Feature {
	out := map[string]Feature{}
	for _, d := range featureDefs {
		f := Feature{Name: d.name, What: d.what, Fix: d.fix, State: Present}
		if s, ok := states[d.name]; ok {
			f.State = s
		}
		out[d.name] = f
	}
	return out
}

var noQemu = []vm.Missing{{Program: "qemu-system-x86_64", Package: "qemu-system-x86"}}

func TestDecide(t *testing.T) {
	ipvs := modeNeeds{name: "ipvs", kernel: []string{"ip_vs", "ip_set", "dummy", "nf_tables"}}
	for _, tc := range []struct {
		name      string
		mode      modeNeeds
		features  map[string]Feature
		vmMissing []vm.Missing
		want      ModeVerdict
		text      string
	}{
		{name: "everything here", mode: ipvs, features: allPresent(nil),
			want: ModeVerdict{Mode: "ipvs", Where: Native}, text: "native"},
		{name: "no IPVS, VM ready", mode: ipvs, features: allPresent(map[string]string{"ip_vs": Missing, "dummy": Missing}),
			want: ModeVerdict{Mode: "ipvs", Where: InVM, Why: "this kernel lacks ip_vs (IPVS), dummy (dummy interfaces, for kube-ipvs0)"},
			text: "in the VM: this kernel lacks ip_vs (IPVS), dummy (dummy interfaces, for kube-ipvs0)"},
		{name: "no IPVS, no qemu", mode: ipvs, features: allPresent(map[string]string{"ip_vs": Missing}), vmMissing: noQemu,
			want: ModeVerdict{Mode: "ipvs", Where: Nowhere, Why: "ip_vs (modprobe ip_vs, or a kernel with CONFIG_IP_VS); svclab's VM needs qemu-system-x86_64 (apt-get install qemu-system-x86)"},
			text: "cannot run: ip_vs (modprobe ip_vs, or a kernel with CONFIG_IP_VS); svclab's VM needs qemu-system-x86_64 (apt-get install qemu-system-x86)"},
		// What every lab needs counts for every mode, declared or not.
		{name: "no veth", mode: modeNeeds{name: "iptables", kernel: []string{"nf_tables"}}, features: allPresent(map[string]string{"veth": Missing}),
			want: ModeVerdict{Mode: "iptables", Where: InVM, Why: "this kernel lacks veth (veth pairs)"}},
		// The mode's own check speaks when the kernel has everything.
		{name: "programs missing everywhere", features: allPresent(nil),
			mode:      modeNeeds{name: "iptables", kernel: []string{"nf_tables"}, available: errors.New("iptables nft backend: iptables-nft not found: install iptables (scripts/setup.sh)")},
			vmMissing: []vm.Missing{{Program: "xtables-nft-multi", Package: "iptables"}},
			want: ModeVerdict{Mode: "iptables", Where: Nowhere,
				Why: "iptables nft backend: iptables-nft not found: install iptables (scripts/setup.sh); svclab's VM needs xtables-nft-multi (apt-get install iptables)"}},
		{name: "kernel check fails, VM ready", features: allPresent(nil),
			mode: modeNeeds{name: "ipvs", available: errors.New("this kernel has no IPVS")},
			want: ModeVerdict{Mode: "ipvs", Where: InVM, Why: "this kernel has no IPVS"}},
		{name: "a feature not probed", mode: ipvs, features: allPresent(map[string]string{"ip_set": Unknown}),
			want: ModeVerdict{Mode: "ipvs", Where: Native, Why: "unverified: not probed: ip_set"},
			text: "native (unverified: not probed: ip_set)"},
		{name: "nothing probed", mode: ipvs, features: map[string]Feature{},
			want: ModeVerdict{Mode: "ipvs", Where: Native, Why: "unverified: 8 kernel features it needs were not probed"}},
		{name: "a feature doctor cannot probe", mode: modeNeeds{name: "ebpf", kernel: []string{"bpf_lb"}}, features: allPresent(nil),
			want: ModeVerdict{Mode: "ebpf", Where: Native, Why: "unverified: not probed: bpf_lb (doctor has no probe for it)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.mode, tc.features, tc.vmMissing)
			if got != tc.want {
				t.Errorf("decide:\n got %+v\nwant %+v", got, tc.want)
			}
			if tc.text != "" && got.String() != tc.text {
				t.Errorf("String() = %q, want %q", got.String(), tc.text)
			}
		})
	}
}

func TestJudgeOKOnlyWhenEveryModeRuns(t *testing.T) {
	modes := []modeNeeds{
		{name: "iptables", kernel: []string{"nf_tables"}},
		{name: "ipvs", kernel: []string{"ip_vs"}},
	}
	var features []Feature
	for _, f := range allPresent(map[string]string{"ip_vs": Missing}) {
		features = append(features, f)
	}
	verdicts, ok := judge(modes, features, nil)
	if !ok || verdicts[0].Where != Native || verdicts[1].Where != InVM {
		t.Errorf("VM ready: ok %v, verdicts %+v; want ok, native and vm", ok, verdicts)
	}
	verdicts, ok = judge(modes, features, noQemu)
	if ok || verdicts[0].Where != Native || verdicts[1].Where != Nowhere {
		t.Errorf("no qemu: ok %v, verdicts %+v; want not ok, native and none", ok, verdicts)
	}
}

// TestModesComeFromTheRegistry: doctor judges every registered mode, and has a
// probe for every kernel feature each declares, so none is reported unverified
// for want of one.
func TestModesComeFromTheRegistry(t *testing.T) {
	var names []string
	for _, m := range registeredModes() {
		names = append(names, m.name)
		if len(m.kernel) == 0 {
			t.Errorf("mode %s declares no kernel features (proxy.Mode.Kernel)", m.name)
		}
		for _, f := range m.kernel {
			if _, ok := lookupFeature(f); !ok {
				t.Errorf("mode %s needs kernel feature %q, which doctor has no probe for", m.name, f)
			}
		}
	}
	if strings.Join(names, ",") != strings.Join(proxy.Modes(), ",") {
		t.Errorf("doctor judges %v, the registry has %v", names, proxy.Modes())
	}
	for _, f := range labFeatures {
		if _, ok := lookupFeature(f); !ok {
			t.Errorf("lab feature %q has no probe", f)
		}
	}
}

func TestProbeWithoutPrivilegesSaysSo(t *testing.T) {
	features, ns, err := probeKernel(context.Background(), false)
	if err != nil || ns != "" {
		t.Fatalf("probe without privileges: namespace %q, err %v", ns, err)
	}
	if len(features) != len(featureDefs) {
		t.Errorf("%d features, want %d", len(features), len(featureDefs))
	}
	for _, f := range features {
		if f.State != Unknown || f.Detail != "not probed (not root)" {
			t.Errorf("%s: %s %q, want unknown: not probed (not root)", f.Name, f.State, f.Detail)
		}
	}
}

// TestUnprobedCannotTell: without the probe (not root), no mode is said to run
// natively and the report is not OK: doctor cannot tell. A mode found unable to
// run without the probe (a program missing, no VM) still says so.
func TestUnprobedCannotTell(t *testing.T) {
	features, _, err := probeKernel(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	modes := []modeNeeds{{name: "iptables"}, {name: "nftables", available: errors.New("nft: not found")},
		{name: "checked-as-root", available: fmt.Errorf("checking it %w", proxy.ErrNeedsRoot)}}
	for _, vmMissing := range [][]vm.Missing{nil, noQemu} {
		rep := Report{Features: features, VMMissing: vmMissing}
		rep.Modes, rep.OK = judge(modes, features, vmMissing)
		rep.undecided()
		if rep.OK || rep.Probed {
			t.Errorf("unprobed report: ok %t, probed %t", rep.OK, rep.Probed)
		}
		if v := rep.Modes[0]; v.Where != CannotTell || !strings.Contains(v.String(), "cannot tell: the kernel features it needs were not probed") {
			t.Errorf("iptables unprobed: %s", v)
		}
		if v := rep.Modes[1]; v.Where == CannotTell || v.Where == Native {
			t.Errorf("nftables without nft, unprobed: %s", v)
		}
		if v := rep.Modes[2]; v.Where != CannotTell {
			t.Errorf("a mode whose own check needs root, unprobed: %s", v)
		}
		var b strings.Builder
		if err := WriteText(&b, rep); err != nil {
			t.Fatal(err)
		}
		if out := b.String(); !strings.Contains(out, "cannot tell which modes can run natively") || strings.Contains(out, "every mode can run") {
			t.Errorf("unprobed text:\n%s", out)
		}
	}
}

func TestWriteText(t *testing.T) {
	rep := Report{
		HostKernel: "6.18.44",
		Probed:     true,
		Probe:      "tried for real in a throwaway network namespace (svclab-doctor-1, removed again)",
		Features: []Feature{
			{Name: "veth", What: "veth pairs", State: Present},
			{Name: "ip_vs", What: "IPVS", State: Missing, Detail: "generic netlink family IPVS: no such file or directory", Fix: "modprobe ip_vs, or a kernel with CONFIG_IP_VS"},
		},
		Programs: []Program{
			{Name: "iptables-nft", Package: "iptables", Path: "/usr/sbin/iptables-nft", Version: "iptables v1.8.9 (nf_tables)"},
			{Name: "nft", Package: "nftables"},
		},
		KVM:       KVM{Device: "/dev/kvm: no such file or directory"},
		VMMissing: noQemu,
		Modes: []ModeVerdict{
			{Mode: "iptables", Where: Native},
			{Mode: "ipvs", Where: Nowhere, Why: "ip_vs (modprobe ip_vs); svclab's VM needs qemu-system-x86_64 (apt-get install qemu-system-x86)"},
		},
	}
	var b strings.Builder
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"host kernel 6.18.44\n",
		"ip_vs  IPVS        missing: generic netlink family IPVS: no such file or directory (modprobe ip_vs, or a kernel with CONFIG_IP_VS)\n",
		"iptables-nft  iptables v1.8.9 (nf_tables)\n",
		"nft           missing (apt-get install nftables)\n",
		"host         cannot run it: missing qemu-system-x86_64 (apt-get install qemu-system-x86)\n",
		"accelerator  /dev/kvm: no such file or directory: svclab's VM runs under TCG",
		"kernel       not cached",
		"iptables  native\n",
		"ipvs      cannot run: ip_vs (modprobe ip_vs); svclab's VM needs qemu-system-x86_64 (apt-get install qemu-system-x86)\n",
		"some modes cannot run on this host",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
