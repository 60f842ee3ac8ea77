// Package doctor tells what svclab can run on this host and where: the kernel
// features the proxy modes need, tried for real in a throwaway network
// namespace; the programs svclab and its users run; whether svclab's VM can
// run, under which accelerator, and whether its kernel is cached; and, for every
// registered proxy mode, "native", "in the VM" or "cannot run" with what is
// missing and how to get it. `svclab doctor` prints it.
package doctor

import (
	"context"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/vm"
)

// Report is what doctor found.
type Report struct {
	HostKernel string `json:"hostKernel"`
	// Probe says how the kernel features were found out.
	Probe    string    `json:"probe"`
	Features []Feature `json:"features"`
	Programs []Program `json:"programs"`
	KVM      KVM       `json:"kvm"`
	VMKernel VMKernel  `json:"vmKernel"`
	// VMMissing is what this host lacks to run svclab's VM.
	VMMissing []vm.Missing  `json:"vmMissing"`
	Modes     []ModeVerdict `json:"modes"`
	// OK: every mode can run, natively or in the VM.
	OK bool `json:"ok"`
	// Probed: the kernel features were tried. Unprobed (without root), doctor
	// cannot tell whether a mode runs natively, and says so.
	Probed bool `json:"probed"`
	// UserNamespace: doctor ran in a user namespace of svclab's, as an
	// ordinary user (internal/rootless): the verdicts are what svclab runs
	// without root.
	UserNamespace bool `json:"userNamespace,omitempty"`
	// WithoutRoot is what an ordinary user's svclab can do here.
	WithoutRoot WithoutRoot `json:"withoutRoot"`
}

// KVM is what svclab's VM would start with.
type KVM struct {
	// Device is "usable" or why /dev/kvm is not.
	Device string `json:"device"`
	// Verdict is what an earlier run learned about KVM on this host kernel;
	// nil when KVM was not tried yet (or /dev/kvm is unusable).
	Verdict     *vm.Verdict `json:"verdict,omitempty"`
	VerdictFile string      `json:"verdictFile,omitempty"`
}

// VMKernel is the Debian kernel svclab's VM boots, if one is cached.
type VMKernel struct {
	Cached  bool   `json:"cached"`
	Release string `json:"release,omitempty"`
	Package string `json:"package,omitempty"`
	Version string `json:"version,omitempty"`
	Dir     string `json:"dir,omitempty"`
}

// Options say where svclab's VM keeps its cache and which qemu it runs.
type Options struct {
	CacheDir string // default vm.DefaultCacheDir
	Qemu     string // default qemu-system-x86_64
}

// Run examines this host. It needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) to
// probe the kernel; without, the features say they were not probed and the
// rest is reported all the same. An error means the probe itself broke.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.CacheDir == "" {
		o.CacheDir = vm.DefaultCacheDir
	}
	if o.Qemu == "" {
		o.Qemu = "qemu-system-x86_64"
	}
	var rep Report
	rep.HostKernel = vm.HostKernelRelease()
	rep.UserNamespace = namespaces.InUserNamespace()
	privileged := namespaces.CheckPrivileges() == nil
	features, ns, err := probeKernel(ctx, privileged)
	if err != nil {
		return rep, err
	}
	rep.Features = features
	switch {
	case !privileged:
		rep.Probe = "not probed: trying them in a throwaway network namespace needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN); run `sudo svclab doctor`"
	case ns == "":
		rep.Probe = "no network namespace could be created"
	default:
		rep.Probe = "tried for real in a throwaway network namespace (" + ns + ", removed again)"
	}
	rep.Programs = findPrograms(ctx, o.Qemu)
	rep.KVM = kvmStatus(o.CacheDir)
	rep.VMKernel = vmKernel(o.CacheDir)
	rep.VMMissing = append([]vm.Missing{}, vm.HostMissing(o.CacheDir, o.Qemu)...)
	rep.Modes, rep.OK = judge(registeredModes(), rep.Features, rep.VMMissing)
	rep.WithoutRoot = withoutRoot(ctx)
	rep.Probed = privileged && ns != ""
	if !rep.Probed {
		rep.undecided()
	}
	return rep, nil
}

// judge decides every mode; ok when each can run somewhere.
func judge(modes []modeNeeds, features []Feature, vmMissing []vm.Missing) ([]ModeVerdict, bool) {
	byName := map[string]Feature{}
	for _, f := range features {
		byName[f.Name] = f
	}
	ok := true
	var out []ModeVerdict
	for _, m := range modes {
		v := decide(m, byName, vmMissing)
		ok = ok && v.Where != Nowhere
		out = append(out, v)
	}
	return out, ok
}

// undecided takes back every "native" of a report whose kernel was not probed:
// without the probe, "native" would be a guess. What is known without it stays:
// a mode that cannot run anywhere, one that runs in the VM.
func (rep *Report) undecided() {
	rep.OK = false
	for i, v := range rep.Modes {
		if v.Where != Native {
			continue
		}
		why := "the kernel features it needs were not probed (needs root: sudo svclab doctor)"
		if len(rep.VMMissing) == 0 {
			why += "; svclab's VM can run it"
		}
		rep.Modes[i] = ModeVerdict{Mode: v.Mode, Where: CannotTell, Why: why}
	}
}

func kvmStatus(cacheDir string) KVM {
	if err := vm.KVMUsable(); err != nil {
		return KVM{Device: err.Error()}
	}
	k := KVM{Device: "usable", VerdictFile: vm.VerdictPath(cacheDir)}
	if v, ok := vm.LoadVerdict(cacheDir); ok {
		k.Verdict = &v
	}
	return k
}

func vmKernel(cacheDir string) VMKernel {
	k, err := vm.CachedKernel(cacheDir)
	if err != nil {
		return VMKernel{}
	}
	return VMKernel{Cached: true, Release: k.Release, Package: k.Package, Version: k.Version, Dir: k.Dir}
}

// describe says what the KVM status means for svclab's VM, in one line.
func (k KVM) describe() string {
	switch {
	case k.Device != "usable":
		return k.Device + ": svclab's VM runs under TCG (slower, works everywhere)"
	case k.Verdict == nil:
		return "/dev/kvm usable, not tried yet: the first VM run tries it and falls back to TCG if a guest does not boot under it"
	default:
		return "/dev/kvm usable; " + k.Verdict.Accel + " since " + k.Verdict.Checked.Local().Format(time.DateTime) +
			" (" + k.Verdict.Reason + "; remembered in " + k.VerdictFile + ", delete it to try KVM again)"
	}
}
