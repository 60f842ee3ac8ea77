package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/internal/atomicfile"
)

// A KVM guest that works prints its first kernel line well within a second and
// reaches /init in one or two. On some hosts (nested virtualisation without the
// right support) /dev/kvm opens fine but the guest crawls or hangs before the
// kernel prints anything; these limits catch that without costing a working
// host anything.
const (
	kvmFirstLineWithin = 4 * time.Second
	kvmInitWithin      = 15 * time.Second
)

// kvmWatch bounds a KVM boot's progress: the guest kernel's first console line
// within firstLine, /init within init, both from qemu's start. Tests shorten it.
type kvmWatch struct {
	firstLine, init time.Duration
}

var defaultKVMWatch = kvmWatch{firstLine: kvmFirstLineWithin, init: kvmInitWithin}

// KVMUsable checks that /dev/kvm opens and speaks the stable KVM API (12). That
// says nothing about whether a guest boots under it: auto mode finds that out
// on the first run (see the package documentation).
func KVMUsable() error {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("/dev/kvm: %w", err)
	}
	defer unix.Close(fd)
	const kvmGetAPIVersion = 0xAE00 // _IO(KVMIO, 0x00)
	v, err := unix.IoctlRetInt(fd, kvmGetAPIVersion)
	if err != nil {
		return fmt.Errorf("/dev/kvm: KVM_GET_API_VERSION: %w", err)
	}
	if v != 12 {
		return fmt.Errorf("/dev/kvm: API version %d, want 12", v)
	}
	return nil
}

// Verdict is what auto mode learned about KVM on one host kernel: the
// accelerator later runs start with, and why.
type Verdict struct {
	Accel      string    `json:"accel"`
	Reason     string    `json:"reason"`
	HostKernel string    `json:"host_kernel"`
	Checked    time.Time `json:"checked"`
}

// HostKernelRelease is uname -r: verdicts are kept per host kernel, since a
// kernel update can make KVM work or break it.
func HostKernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// VerdictPath is the file holding this host kernel's verdict in cacheDir.
func VerdictPath(cacheDir string) string {
	rel := strings.ReplaceAll(HostKernelRelease(), "/", "_")
	return filepath.Join(cacheDir, "accel", rel+".json")
}

// LoadVerdict reads this host kernel's verdict from cacheDir; ok is false when
// there is none (KVM not tried yet) or it cannot be read.
func LoadVerdict(cacheDir string) (v Verdict, ok bool) {
	b, err := os.ReadFile(VerdictPath(cacheDir))
	if err != nil || json.Unmarshal(b, &v) != nil {
		return v, false
	}
	return v, v.Accel == AccelKVM || v.Accel == AccelTCG
}

func saveVerdict(cacheDir string, v Verdict) error {
	v.HostKernel = HostKernelRelease()
	v.Checked = time.Now().UTC()
	p := VerdictPath(cacheDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(p, append(b, '\n'), 0o644)
}

// kvmFailure says in one line why a KVM boot ended before /init: the watch limit
// it missed (stalled), or how qemu ended, followed by the first thing qemu said
// on stderr or, failing that, the guest console's last line. Whatever the way,
// it means the same thing: KVM does not run guests on this host.
func kvmFailure(stalled string, p *qemuProcess, qemu string) string {
	said := qemuSaid(p.stderrHead.String(), filepath.Base(qemu))
	console := p.console.lastLines(1)
	msg := stalled
	if msg == "" {
		msg = qemuEnd(p.waitErr)
		if console == "" {
			msg += " before the guest started"
		} else {
			msg += " before the guest reached /init"
		}
		if said != "" {
			return msg + ": " + said
		}
	} else if said != "" {
		return msg + "; qemu said: " + said
	}
	if console != "" {
		msg += "; the console's last line: " + console
	}
	return msg
}

// qemuEnd describes how qemu ended from its wait status.
func qemuEnd(waitErr error) string {
	var exit *exec.ExitError
	if !errors.As(waitErr, &exit) {
		if waitErr != nil {
			return fmt.Sprintf("qemu failed (%v)", waitErr)
		}
		return "qemu exited with status 0"
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled() && ws.Signal() == syscall.SIGABRT:
		return "qemu aborted"
	case ok && ws.Signaled():
		return fmt.Sprintf("qemu was killed by %s (%v)", unix.SignalName(ws.Signal()), ws.Signal())
	default:
		return fmt.Sprintf("qemu exited with status %d", exit.ExitCode())
	}
}

// qemuSaid is the first line of qemu's stderr that is not a warning, without
// qemu's "PROGRAM: " and "error: " prefixes; a warning if there is nothing else.
func qemuSaid(stderr, program string) string {
	var warning string
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), program+":"))
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "warning:") {
			if warning == "" {
				warning = line
			}
			continue
		}
		return strings.TrimPrefix(line, "error: ")
	}
	return warning
}
