package bench

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/version"
)

// Machine records where a run took place.
type Machine struct {
	// Where is "host" (this machine's kernel) or "vm" (svclab's VM).
	Where string `json:"where"`
	// Kernel is uname's release and version.
	Kernel string `json:"kernel"`
	// IPTables maps each xtables backend measured to its `iptables --version`
	// line.
	IPTables map[string]string `json:"iptables,omitempty"`
	CPU      string            `json:"cpu"`
	CPUs     int               `json:"cpus"`
	// MemoryMiB is MemTotal.
	MemoryMiB int `json:"memoryMiB"`
	// Hypervisor tells whether the CPU says it runs under one (the cpuinfo flag).
	Hypervisor bool `json:"hypervisor"`
	// Accel is the VM's accelerator (kvm, tcg), filled in by whoever ran the VM.
	Accel     string `json:"accel,omitempty"`
	GoVersion string `json:"go"`
	// KubeProxy is the kube-proxy release whose rules svclab reproduces.
	KubeProxy string `json:"kubeProxy"`
	// LoadStart and LoadEnd are /proc/loadavg when the run started and ended:
	// on a shared machine, what else was running.
	LoadStart string `json:"loadStart"`
	LoadEnd   string `json:"loadEnd,omitempty"`
	// HostLoad is the host's load average around a run in the VM, filled in by
	// whoever ran the VM: another VM or build on the host slows the guest.
	HostLoad string `json:"hostLoad,omitempty"`
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// readMachine records this machine, and the version of the xtables programs
// of every variant measured that names a backend.
func readMachine(where string, measured []Measured) Machine {
	m := Machine{Where: where, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), KubeProxy: version.Default.String(), LoadStart: LoadAvg()}
	var uts [2]string
	for i, f := range []string{"/proc/sys/kernel/osrelease", "/proc/sys/kernel/version"} {
		b, _ := os.ReadFile(f)
		uts[i] = strings.TrimSpace(string(b))
	}
	m.Kernel = strings.TrimSpace(uts[0] + " " + uts[1])
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch {
			case k == "model name" && m.CPU == "":
				m.CPU = v
			case k == "flags" && strings.Contains(" "+v+" ", " hypervisor "):
				m.Hypervisor = true
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				if kb, err := strconv.Atoi(strings.Fields(rest)[0]); err == nil {
					m.MemoryMiB = kb / 1024
				}
			}
		}
		f.Close()
	}
	m.IPTables = map[string]string{}
	for _, me := range measured {
		for _, v := range me.Variants {
			if v.Backend == "" || m.IPTables[v.Backend] != "" {
				continue
			}
			m.IPTables[v.Backend] = xtablesVersion(v.Backend)
		}
	}
	return m
}

// xtablesVersion is `iptables --version` of the backend called name.
func xtablesVersion(name string) string {
	b, err := xtables.BackendFor(name)
	if err != nil {
		return "unknown: " + err.Error()
	}
	out, err := exec.Command(b.IPTables, "--version").Output()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}
