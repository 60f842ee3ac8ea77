package vm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVMAutoAccelProbesOnce runs "auto" against a cache without a verdict: the
// first run must decide (on hosts where KVM hangs or qemu aborts under it, by
// falling back to TCG), record the verdict, and the second run must use it
// without probing. TestKVMFallback covers each way KVM fails on any host. The kernel and
// image are shared with the real cache, so nothing is downloaded or built twice.
func TestVMAutoAccelProbesOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("vm tests need root: run them as root (sudo go test ./vm/)")
	}
	real := DefaultCacheDir
	cache := t.TempDir()
	for _, d := range []string{"kernel", "image"} {
		if err := os.MkdirAll(filepath.Join(real, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(real, d), filepath.Join(cache, d)); err != nil {
			t.Fatal(err)
		}
	}
	run := func() (Result, string) {
		var log bytes.Buffer
		var stdout bytes.Buffer
		res, err := Execute(context.Background(), Config{
			Command:  []string{"echo", "ran"},
			CacheDir: cache,
			Timeout:  5 * time.Minute,
			Stdout:   &stdout,
			Log:      &log,
		})
		t.Logf("log:\n%s", log.String())
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if res.ExitCode != 0 || stdout.String() != "ran\n" {
			t.Fatalf("exit %d, stdout %q", res.ExitCode, stdout.String())
		}
		return res, log.String()
	}

	first, _ := run()
	if kvmErr := KVMUsable(); kvmErr != nil {
		t.Logf("/dev/kvm unusable here (%v): auto must choose tcg and record nothing", kvmErr)
		if first.Accel != AccelTCG {
			t.Errorf("accel %q without a usable /dev/kvm", first.Accel)
		}
		if _, ok := LoadVerdict(cache); ok {
			t.Error("a verdict was recorded although KVM was never tried")
		}
		return
	}
	v, ok := LoadVerdict(cache)
	if !ok {
		t.Fatalf("no verdict in %s after the first auto run", VerdictPath(cache))
	}
	if v.Accel != first.Accel {
		t.Errorf("verdict %q, but the run used %q", v.Accel, first.Accel)
	}
	t.Logf("verdict: %+v", v)

	second, log := run()
	if second.Accel != v.Accel {
		t.Errorf("second run used %q, verdict says %q", second.Accel, v.Accel)
	}
	if strings.Contains(log, "first try") || strings.Contains(log, "using tcg, remembered") {
		t.Errorf("second run probed KVM again:\n%s", log)
	}
}
