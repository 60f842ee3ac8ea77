package vm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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

// kvmUsable checks that /dev/kvm opens and speaks the stable KVM API (12).
func kvmUsable() error {
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

// accelVerdict is what auto mode learned about KVM on one host kernel.
type accelVerdict struct {
	Accel      string    `json:"accel"`
	Reason     string    `json:"reason"`
	HostKernel string    `json:"host_kernel"`
	Checked    time.Time `json:"checked"`
}

func hostKernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

func verdictPath(cacheDir string) string {
	rel := strings.ReplaceAll(hostKernelRelease(), "/", "_")
	return filepath.Join(cacheDir, "accel", rel+".json")
}

func loadVerdict(cacheDir string) (accelVerdict, bool) {
	var v accelVerdict
	b, err := os.ReadFile(verdictPath(cacheDir))
	if err != nil || json.Unmarshal(b, &v) != nil {
		return v, false
	}
	return v, v.Accel == AccelKVM || v.Accel == AccelTCG
}

func saveVerdict(cacheDir string, v accelVerdict) error {
	v.HostKernel = hostKernelRelease()
	v.Checked = time.Now().UTC()
	p := verdictPath(cacheDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(p, append(b, '\n'))
}
