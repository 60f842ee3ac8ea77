package vm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// buildTestProgram builds the command in ./testdata/<dir> into a file called
// name in a temporary directory and returns its path.
func buildTestProgram(t *testing.T, dir, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), name)
	// -buildvcs=false: the tests may run as a user git does not trust with this
	// checkout, and a test program needs no version stamp.
	cmd := exec.Command(goBin, "build", "-buildvcs=false", "-o", out, "./testdata/"+dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/%s: %v\n%s", dir, err, b)
	}
	return out
}

// fallbackRun is what one run of the runner against the stand-in qemu did.
type fallbackRun struct {
	res    Result
	err    error
	log    []string // the runner's progress lines
	stdout string
	// starts lists the accelerator of each qemu start, in order.
	starts []string
}

// runStandIn drives the accelerator logic (booter.run) with the stand-in qemu
// (testdata/fakeqemu) doing kvm under -accel kvm, fake kernel and initrd paths,
// a /dev/kvm that kvmErr says is usable or not, and the given watch limits.
func runStandIn(t *testing.T, qemu, cache, accel, kvm string, status string, kvmErr error, watch kvmWatch) fallbackRun {
	t.Helper()
	starts := filepath.Join(t.TempDir(), "starts")
	t.Setenv("FAKEQEMU_KVM", kvm)
	t.Setenv("FAKEQEMU_STATUS", status)
	t.Setenv("FAKEQEMU_LOG", starts)
	var log, stdout bytes.Buffer
	c, err := Config{
		Command: []string{"true"}, Accel: accel, CacheDir: cache, Qemu: qemu,
		Timeout: 5 * time.Minute, Stdout: &stdout, Log: &log,
	}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	b := newBooter(c, qemu, "/nonexistent/vmlinux", "/nonexistent/initrd", t.TempDir())
	b.kvmUsable = func() error { return kvmErr }
	b.watch = watch
	var r fallbackRun
	r.res, r.err = b.run(context.Background(), Result{ExitCode: -1})
	r.log = strings.Split(strings.TrimSpace(log.String()), "\n")
	r.stdout = stdout.String()
	if b, err := os.ReadFile(starts); err == nil {
		r.starts = strings.Fields(string(b))
	}
	t.Logf("log:\n%s", log.String())
	return r
}

// TestKVMFallback boots the stand-in qemu in every way a KVM boot can fail
// before /init, and in the ways it can work or fail after it. Every failure
// before /init must end under TCG in the same run with one line saying why and
// a verdict for this host kernel, which the next run uses without trying KVM;
// a failure after /init is the command's and must not fall back.
func TestKVMFallback(t *testing.T) {
	qemu := buildTestProgram(t, "fakeqemu", "qemu-system-x86_64")
	// Limits far beyond any process start, where the test waits for qemu to end
	// by itself; short ones where it hangs, so a hang costs a fraction of a second.
	patient := kvmWatch{firstLine: time.Minute, init: time.Minute}
	const tcgOutput = "the stand-in guest ran the command under tcg\n"
	for _, tc := range []struct {
		name, kvm string
		watch     kvmWatch
		// reasons are the accepted one-line reasons of the fallback.
		reasons []string
	}{
		{name: "abort", kvm: "abort", watch: patient,
			reasons: []string{"kvm: qemu aborted before the guest started: failed to set MSR 0x10a to 0x69"}},
		{name: "segfault", kvm: "segv", watch: patient,
			reasons: []string{"kvm: qemu was killed by SIGSEGV (segmentation fault) before the guest started"}},
		{name: "exit 1", kvm: "exit1", watch: patient,
			reasons: []string{"kvm: qemu exited with status 1 before the guest started: -accel kvm: failed to initialize kvm: Permission denied"}},
		{name: "silent", kvm: "silent", watch: kvmWatch{firstLine: 200 * time.Millisecond, init: time.Minute},
			reasons: []string{"kvm: the guest kernel printed nothing within 200ms"}},
		// The console line is quoted when the stand-in printed it before the
		// limit passed, which a loaded machine may delay.
		{name: "stall", kvm: "stall", watch: kvmWatch{firstLine: time.Minute, init: time.Second},
			reasons: []string{
				"kvm: the guest did not reach /init within 1s; the console's last line: Linux version 6.1.0-fake (svclab's stand-in qemu)",
				"kvm: the guest did not reach /init within 1s",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			verdictFile := VerdictPath(cache)
			r := runStandIn(t, qemu, cache, AccelAuto, tc.kvm, "0", nil, tc.watch)
			if r.err != nil {
				t.Fatalf("run: %v", r.err)
			}
			if r.res.Accel != AccelTCG || r.res.ExitCode != 0 || r.stdout != tcgOutput {
				t.Errorf("accel %q, exit %d, stdout %q; want tcg, 0, %q", r.res.Accel, r.res.ExitCode, r.stdout, tcgOutput)
			}
			if want := []string{AccelKVM, AccelTCG}; strings.Join(r.starts, " ") != strings.Join(want, " ") {
				t.Errorf("qemu started with %v, want %v", r.starts, want)
			}
			var said []string
			for _, l := range r.log {
				if strings.Contains(l, "using tcg") {
					said = append(said, l)
				}
			}
			v, ok := LoadVerdict(cache)
			if !ok {
				t.Fatalf("no verdict in %s", verdictFile)
			}
			if v.Accel != AccelTCG || v.HostKernel != HostKernelRelease() || v.Checked.IsZero() {
				t.Errorf("verdict %+v, want tcg for host kernel %s", v, HostKernelRelease())
			}
			accepted := false
			for _, want := range tc.reasons {
				accepted = accepted || v.Reason == want
			}
			if !accepted {
				t.Errorf("verdict reason %q, want one of %q", v.Reason, tc.reasons)
			}
			if want := "vm: " + v.Reason + "; using tcg, remembered in " + verdictFile; len(said) != 1 || said[0] != want {
				t.Errorf("fallback lines %q, want exactly [%q]", said, want)
			}

			// The next run starts under TCG, saying why, and never tries KVM.
			again := runStandIn(t, qemu, cache, AccelAuto, tc.kvm, "0", nil, tc.watch)
			if again.err != nil || again.res.Accel != AccelTCG || again.stdout != tcgOutput {
				t.Errorf("second run: accel %q, stdout %q, err %v", again.res.Accel, again.stdout, again.err)
			}
			if strings.Join(again.starts, " ") != AccelTCG {
				t.Errorf("second run started qemu with %v, want only tcg", again.starts)
			}
			if want := "vm: qemu: tcg (verdict in " + verdictFile + ": " + v.Reason + "), 2 CPUs, 2048 MiB"; again.log[0] != want {
				t.Errorf("second run's first line %q, want %q", again.log[0], want)
			}
		})
	}
}

// TestKVMFallbackNotAfterInit: a KVM guest that reached /init proved KVM works,
// so whatever happens next is the command's outcome, reported as such, under
// KVM, and the verdict says kvm.
func TestKVMFallbackNotAfterInit(t *testing.T) {
	qemu := buildTestProgram(t, "fakeqemu", "qemu-system-x86_64")
	patient := kvmWatch{firstLine: time.Minute, init: time.Minute}

	t.Run("boots", func(t *testing.T) {
		cache := t.TempDir()
		r := runStandIn(t, qemu, cache, AccelAuto, "boot", "0", nil, patient)
		if r.err != nil || r.res.Accel != AccelKVM || r.res.ExitCode != 0 || r.stdout != "the stand-in guest ran the command under kvm\n" {
			t.Errorf("accel %q, exit %d, stdout %q, err %v; want kvm, 0", r.res.Accel, r.res.ExitCode, r.stdout, r.err)
		}
		checkKVMVerdict(t, cache)
		again := runStandIn(t, qemu, cache, AccelAuto, "boot", "0", nil, patient)
		if again.err != nil || again.res.Accel != AccelKVM || !strings.HasPrefix(again.log[0], "vm: qemu: kvm (verdict in ") {
			t.Errorf("second run: accel %q, first line %q, err %v", again.res.Accel, again.log[0], again.err)
		}
	})
	t.Run("command fails", func(t *testing.T) {
		cache := t.TempDir()
		r := runStandIn(t, qemu, cache, AccelAuto, "boot", "3", nil, patient)
		if r.err != nil || r.res.Accel != AccelKVM || r.res.ExitCode != 3 {
			t.Errorf("accel %q, exit %d, err %v; want kvm, the command's status 3, no error", r.res.Accel, r.res.ExitCode, r.err)
		}
		if strings.Join(r.starts, " ") != AccelKVM {
			t.Errorf("qemu started with %v, want only kvm", r.starts)
		}
		checkKVMVerdict(t, cache)
	})
	t.Run("qemu dies while the command runs", func(t *testing.T) {
		cache := t.TempDir()
		r := runStandIn(t, qemu, cache, AccelAuto, "die-after-init", "0", nil, patient)
		if r.err == nil || !strings.Contains(r.err.Error(), "the guest ended before reporting the command's exit status (qemu: signal: aborted; the guest had been running the command since") {
			t.Errorf("err %v, want the command's failure: the guest ended while running it", r.err)
		}
		if r.res.Accel != AccelKVM || r.res.ExitCode != -1 {
			t.Errorf("accel %q, exit %d; want kvm, -1", r.res.Accel, r.res.ExitCode)
		}
		if strings.Join(r.starts, " ") != AccelKVM {
			t.Errorf("qemu started with %v, want only kvm (no fallback)", r.starts)
		}
		for _, l := range r.log {
			if strings.Contains(l, "using tcg") {
				t.Errorf("fell back after /init: %q", l)
			}
		}
		checkKVMVerdict(t, cache)
	})
}

func checkKVMVerdict(t *testing.T, cache string) {
	t.Helper()
	v, ok := LoadVerdict(cache)
	if !ok || v.Accel != AccelKVM || !strings.HasPrefix(v.Reason, "a guest reached /init ") {
		t.Errorf("verdict %+v (found: %v), want kvm: a guest reached /init", v, ok)
	}
}

// TestKVMFallbackOnlyInAuto: asked for KVM, a failure is the run's error and
// nothing is remembered; without a usable /dev/kvm, auto uses TCG at once and
// remembers nothing either (there was nothing to try).
func TestKVMFallbackOnlyInAuto(t *testing.T) {
	qemu := buildTestProgram(t, "fakeqemu", "qemu-system-x86_64")
	patient := kvmWatch{firstLine: time.Minute, init: time.Minute}

	t.Run("accel kvm", func(t *testing.T) {
		cache := t.TempDir()
		r := runStandIn(t, qemu, cache, AccelKVM, "abort", "0", nil, patient)
		if r.err == nil || !strings.HasPrefix(r.err.Error(), "vm: accel kvm: qemu aborted before the guest started: failed to set MSR 0x10a to 0x69\n") {
			t.Errorf("err %v, want vm: accel kvm: qemu aborted ...", r.err)
		}
		if strings.Join(r.starts, " ") != AccelKVM {
			t.Errorf("qemu started with %v, want only kvm", r.starts)
		}
		if _, err := os.Stat(VerdictPath(cache)); err == nil {
			t.Error("a verdict was written for an explicit --accel kvm")
		}
	})
	t.Run("no /dev/kvm", func(t *testing.T) {
		cache := t.TempDir()
		noKVM := os.ErrNotExist
		r := runStandIn(t, qemu, cache, AccelAuto, "abort", "0", noKVM, patient)
		if r.err != nil || r.res.Accel != AccelTCG || strings.Join(r.starts, " ") != AccelTCG {
			t.Errorf("accel %q, starts %v, err %v; want tcg only", r.res.Accel, r.starts, r.err)
		}
		if want := "vm: qemu: tcg (" + noKVM.Error() + "), 2 CPUs, 2048 MiB"; r.log[0] != want {
			t.Errorf("first line %q, want %q", r.log[0], want)
		}
		if _, err := os.Stat(VerdictPath(cache)); err == nil {
			t.Error("a verdict was written although KVM was never tried")
		}
	})
}

func TestQemuSaid(t *testing.T) {
	for _, tc := range []struct{ stderr, want string }{
		{"", ""},
		{"qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69\nqemu-system-x86_64: kvm.c:3183: kvm_buf_set_msrs: Assertion failed.\n",
			"failed to set MSR 0x10a to 0x69"},
		// Warnings come before the error that matters, and stand in when alone.
		{"qemu-system-x86_64: warning: host doesn't support requested feature: CPUID.80000001H:ECX.svm [bit 2]\nqemu-system-x86_64: -accel kvm: failed to initialize kvm: No such file or directory\n",
			"-accel kvm: failed to initialize kvm: No such file or directory"},
		{"qemu-system-x86_64: warning: host doesn't support requested feature\n", "warning: host doesn't support requested feature"},
	} {
		if got := qemuSaid(tc.stderr, "qemu-system-x86_64"); got != tc.want {
			t.Errorf("qemuSaid(%q) = %q, want %q", tc.stderr, got, tc.want)
		}
	}
}
