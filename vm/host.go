package vm

import (
	"fmt"
	"os/exec"
)

// Missing is a host program the VM needs and does not find, with the Debian
// package that has it.
type Missing struct {
	Program string `json:"program"`
	Package string `json:"package"`
}

func (m Missing) String() string {
	return fmt.Sprintf("%s (apt-get install %s)", m.Program, m.Package)
}

// hostPrograms are the programs the runner itself runs on the host: ldd lists
// the guest tools' libraries, dpkg-deb and depmod unpack the kernel's modules.
var hostPrograms = []guestTool{
	{name: "ldd", pkg: "libc-bin"},
	{name: "dpkg-deb", pkg: "dpkg"},
	{name: "depmod", pkg: "kmod"},
}

// kernelFetchers resolve and download a kernel; only needed until one is cached.
var kernelFetchers = []guestTool{
	{name: "apt-get", pkg: "apt"},
	{name: "apt-cache", pkg: "apt"},
}

// HostMissing lists what this host lacks to run the VM: qemu (qemu is the
// binary Config.Qemu names, "" for the default), the programs the guest image
// is made of, the runner's own helpers and, while cacheDir holds no kernel, apt
// to fetch one. Nothing missing means Run can start; the first run still
// downloads the kernel, which needs Debian's package mirrors.
func HostMissing(cacheDir, qemu string) []Missing {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir
	}
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	var missing []Missing
	if _, err := exec.LookPath(qemu); err != nil {
		missing = append(missing, Missing{Program: qemu, Package: "qemu-system-x86"})
	}
	for _, t := range append([]guestTool{busybox}, guestTools...) {
		if _, err := findHostTool(t.name); err != nil {
			missing = append(missing, Missing{Program: t.name, Package: t.pkg})
		}
	}
	needed := hostPrograms
	if _, err := CachedKernel(cacheDir); err != nil {
		needed = append(needed, kernelFetchers...)
	}
	for _, t := range needed {
		if _, err := exec.LookPath(t.name); err != nil {
			missing = append(missing, Missing{Program: t.name, Package: t.pkg})
		}
	}
	return missing
}
