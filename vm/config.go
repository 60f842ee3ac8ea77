package vm

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
)

// Config describes one VM run: a command run as root in a guest booting Debian's
// distribution kernel, which has what this machine's kernel lacks (IPVS, ipset,
// the dummy interface).
type Config struct {
	// Command is run in the guest as root with working directory /svclab, by
	// dash (so PATH lookup finds real tools, not busybox applets). Required.
	Command []string
	// Files maps guest paths to host paths copied into the guest before boot.
	// Relative guest paths are under /svclab; a host directory is copied whole.
	// Permissions are kept, so executables stay executable.
	Files map[string]string
	// Env is added to the command's environment, over the defaults:
	// PATH=/svclab/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin,
	// HOME=/root, SVCLAB_VM=1.
	Env map[string]string
	// OutDir, if set, receives the guest's /out when the command ends (created if
	// missing; existing files are overwritten).
	OutDir string
	// Timeout is a hard limit for the VM, from qemu's start (boot included) to its
	// end; the VM is killed when it passes. Default DefaultTimeout.
	Timeout time.Duration
	// Stdout and Stderr receive the command's output live, and nothing else (the
	// kernel's messages go to Console). Nil drops the output.
	Stdout, Stderr io.Writer
	// Console receives the guest's console: kernel messages and /init's own
	// diagnostics. Nil drops it; the last lines are quoted in errors anyway.
	Console io.Writer
	// Accel is "auto" (default), "kvm" or "tcg". Auto uses KVM when /dev/kvm works
	// and a KVM guest reaches /init on this host, else TCG (in the same run, when
	// a KVM boot fails); the verdict is kept in CacheDir per host kernel.
	Accel string
	// MemoryMiB and CPUs size the guest; defaults 2048 and 2.
	MemoryMiB, CPUs int
	// CacheDir keeps kernels, guest images and accelerator verdicts across runs.
	// Default DefaultCacheDir.
	CacheDir string
	// Log receives the runner's one-line progress messages (kernel, image, accel,
	// boot time). Nil drops them.
	Log io.Writer
	// Tools are extra host executables (absolute paths or names on PATH) put in
	// the guest at the same path, with the libraries they need. They become part
	// of the cached base image, so keep the list stable.
	Tools []string
	// Qemu is the qemu binary; default qemu-system-x86_64 from PATH.
	Qemu string
}

// Defaults for Config's zero values.
const (
	DefaultTimeout   = 30 * time.Minute
	DefaultMemoryMiB = 2048
	DefaultCPUs      = 2
)

// Accelerators.
const (
	AccelAuto = "auto"
	AccelKVM  = "kvm"
	AccelTCG  = "tcg"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c Config) withDefaults() (Config, error) {
	if len(c.Command) == 0 {
		return c, errors.New("vm: Config.Command is empty")
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MemoryMiB <= 0 {
		c.MemoryMiB = DefaultMemoryMiB
	}
	if c.CPUs <= 0 {
		c.CPUs = DefaultCPUs
	}
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir
	}
	if c.Qemu == "" {
		c.Qemu = "qemu-system-x86_64"
	}
	switch c.Accel {
	case "":
		c.Accel = AccelAuto
	case AccelAuto, AccelKVM, AccelTCG:
	default:
		return c, fmt.Errorf("vm: accel %q: want auto, kvm or tcg", c.Accel)
	}
	for k := range c.Env {
		if !envName.MatchString(k) {
			return c, fmt.Errorf("vm: environment variable name %q is not valid in a shell", k)
		}
	}
	return c, nil
}
