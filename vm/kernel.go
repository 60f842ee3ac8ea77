package vm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/svclab/svclab/internal/atomicfile"
	"github.com/svclab/svclab/internal/cachedir"
)

// Kernel is a Debian distribution kernel cached for guests.
type Kernel struct {
	// Package is the Debian package, e.g. linux-image-6.1.0-57-amd64.
	Package string `json:"package"`
	// Version is the package's version, e.g. 6.1.192-3.
	Version string `json:"version"`
	// Release is the kernel release (uname -r in the guest, the lib/modules
	// directory), e.g. 6.1.0-57-amd64.
	Release string `json:"release"`
	// Dir is the cache directory holding the files below.
	Dir string `json:"-"`
	// Deb is the downloaded package; guest images take their modules from it.
	Deb string `json:"-"`
	// Bzimage is the kernel as shipped (boot/vmlinuz-*).
	Bzimage string `json:"-"`
	// Vmlinux is the decompressed kernel with its PVH entry point, which qemu
	// boots directly; empty when it could not be made (then Bzimage is booted,
	// which costs seconds of decompression under TCG).
	Vmlinux string `json:"vmlinux,omitempty"`
}

// metaPackage is the Debian package that always depends on the current kernel.
const metaPackage = "linux-image-amd64"

// BootImage is the file qemu's -kernel gets.
func (k Kernel) BootImage() string {
	if k.Vmlinux != "" {
		return k.Vmlinux
	}
	return k.Bzimage
}

func (k Kernel) String() string {
	return fmt.Sprintf("%s (%s %s)", k.Release, k.Package, k.Version)
}

// EnsureKernel makes sure the kernel behind linux-image-amd64 is in cacheDir and
// returns it: it resolves the package with apt-cache (running apt-get update once
// if apt knows no candidate), downloads it with apt-get download and unpacks the
// kernel image. A kernel already cached is reused. When apt cannot resolve the
// package (no network, no lists), the newest cached kernel is used instead.
// One line naming the kernel is written to log (which may be nil).
func EnsureKernel(ctx context.Context, cacheDir string, log io.Writer) (Kernel, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir
	}
	lg := logger{log}
	pkg, version, resolveErr := resolveKernelPackage(ctx, cacheDir)
	if resolveErr != nil {
		k, err := CachedKernel(cacheDir)
		if err != nil {
			return Kernel{}, fmt.Errorf("kernel: %w (and no kernel is cached in %s: %v)", resolveErr, cacheDir, err)
		}
		lg.printf("kernel %s (cached; apt could not resolve %s: %v)", k, metaPackage, resolveErr)
		return k, nil
	}
	dir := filepath.Join(cacheDir, "kernel", pkg+"_"+version)
	if k, err := loadKernel(dir); err == nil {
		cachedir.Touch(filepath.Join(dir, "kernel.json"))
		lg.printf("kernel %s (cached)", k)
		return k, nil
	}
	if k, err := sharedKernel(cacheDir, filepath.Base(dir)); err == nil {
		lg.printf("kernel %s (cached by root in %s)", k, k.Dir)
		return k, nil
	}
	// The lock of the directory Prune sweeps (see ensureBaseImage).
	kernels := filepath.Dir(dir)
	unlock, err := cachedir.Lock(ctx, kernels, func() { lg.printf("another svclab is filling the cache %s; waiting for it", kernels) })
	if err != nil {
		return Kernel{}, err
	}
	defer unlock()
	// Another process may have fetched it while this one waited for the lock.
	if k, err := loadKernel(dir); err == nil {
		lg.printf("kernel %s (cached)", k)
		return k, nil
	}
	k, err := fetchKernel(ctx, dir, pkg, version, lg)
	if err != nil {
		return Kernel{}, fmt.Errorf("kernel %s %s: %w", pkg, version, err)
	}
	cachedir.Prune(filepath.Dir(dir), "linux-image-*", "kernel.json", dir, lg.removed)
	lg.printf("kernel %s (downloaded)", k)
	return k, nil
}

// resolveKernelPackage returns the kernel package linux-image-amd64 depends on
// and its candidate version. The two apt-cache calls cost over a second, so the
// answer is kept in cacheDir and reused while apt's package lists are unchanged.
func resolveKernelPackage(ctx context.Context, cacheDir string) (pkg, version string, err error) {
	stamp := aptListsStamp()
	memo := filepath.Join(cacheDir, "kernel", "resolved.json")
	var r resolved
	if b, err := os.ReadFile(memo); err == nil && json.Unmarshal(b, &r) == nil && r.Lists == stamp && stamp != "" {
		return r.Package, r.Version, nil
	}
	pkg, version, err = aptResolve(ctx)
	if err != nil {
		return "", "", err
	}
	r = resolved{Package: pkg, Version: version, Lists: aptListsStamp()}
	if b, err := json.Marshal(r); err == nil && os.MkdirAll(filepath.Dir(memo), 0o755) == nil {
		atomicfile.Write(memo, b, 0o644)
	}
	return pkg, version, nil
}

// resolved is a remembered answer of resolveKernelPackage.
type resolved struct {
	Package string `json:"package"`
	Version string `json:"version"`
	Lists   string `json:"lists"` // aptListsStamp when resolved
}

// aptListsStamp changes whenever apt-get update changes the package lists.
func aptListsStamp() string {
	const lists = "/var/lib/apt/lists"
	entries, err := os.ReadDir(lists)
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			fmt.Fprintf(h, "%s %d %d\n", e.Name(), fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func aptResolve(ctx context.Context) (pkg, version string, err error) {
	pkg, version, err = aptCandidate(ctx)
	if err == nil {
		return pkg, version, nil
	}
	// A fresh machine has no package lists; fetch them once and ask again.
	if out, uerr := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); uerr != nil {
		return "", "", fmt.Errorf("%v; apt-get update: %v: %s", err, uerr, bytes.TrimSpace(out))
	}
	return aptCandidate(ctx)
}

func aptCandidate(ctx context.Context) (pkg, version string, err error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", metaPackage).Output()
	if err != nil {
		return "", "", fmt.Errorf("apt-cache depends %s: %w", metaPackage, err)
	}
	pkg = parseKernelDepends(string(out))
	if pkg == "" {
		return "", "", fmt.Errorf("apt-cache depends %s names no linux-image package", metaPackage)
	}
	out, err = exec.CommandContext(ctx, "apt-cache", "policy", pkg).Output()
	if err != nil {
		return "", "", fmt.Errorf("apt-cache policy %s: %w", pkg, err)
	}
	version = parseCandidate(string(out))
	if version == "" {
		return "", "", fmt.Errorf("apt-cache policy %s: no candidate version", pkg)
	}
	return pkg, version, nil
}

// parseKernelDepends finds "Depends: linux-image-X" in apt-cache depends output.
func parseKernelDepends(out string) string {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "|"))
		if name, ok := strings.CutPrefix(line, "Depends: "); ok && strings.HasPrefix(name, "linux-image-") {
			return strings.Trim(name, "<>")
		}
	}
	return ""
}

func parseCandidate(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate: "); ok && v != "(none)" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func fetchKernel(ctx context.Context, dir, pkg, version string, lg logger) (Kernel, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return Kernel{}, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-")
	if err != nil {
		return Kernel{}, err
	}
	defer os.RemoveAll(tmp)

	// apt-get download drops privileges to _apt unless told not to, and _apt may
	// not write to the cache directory.
	dl := exec.CommandContext(ctx, "apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root", pkg+"="+version)
	dl.Dir = tmp
	if out, err := dl.CombinedOutput(); err != nil {
		return Kernel{}, fmt.Errorf("apt-get download: %v: %s", err, bytes.TrimSpace(out))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return Kernel{}, fmt.Errorf("apt-get download left %d .deb files", len(debs))
	}
	k := Kernel{Package: pkg, Version: version}
	if err := os.Rename(debs[0], filepath.Join(tmp, "linux-image.deb")); err != nil {
		return Kernel{}, err
	}
	release, err := extractBzimage(ctx, filepath.Join(tmp, "linux-image.deb"), filepath.Join(tmp, "vmlinuz"))
	if err != nil {
		return Kernel{}, err
	}
	k.Release = release
	if err := writeVmlinux(ctx, filepath.Join(tmp, "vmlinuz"), filepath.Join(tmp, "vmlinux")); err != nil {
		lg.printf("kernel %s: booting the compressed image, slower under TCG: %v", release, err)
	} else {
		k.Vmlinux = "vmlinux"
	}
	meta, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return Kernel{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "kernel.json"), meta, 0o644); err != nil {
		return Kernel{}, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Kernel{}, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return Kernel{}, err
	}
	return loadKernel(dir)
}

// extractBzimage copies boot/vmlinuz-* out of the package and returns the
// kernel release its name carries.
func extractBzimage(ctx context.Context, deb, dst string) (string, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".boot-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// Only ./boot is extracted here; the modules are unpacked when a guest image
	// is built, which happens once per image.
	cmd := exec.CommandContext(ctx, "sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -x -C "$2" --wildcards './boot/vmlinuz-*'`, "sh", deb, tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("extract boot/vmlinuz-* from %s: %v: %s", deb, err, bytes.TrimSpace(out))
	}
	found, _ := filepath.Glob(filepath.Join(tmp, "boot", "vmlinuz-*"))
	if len(found) != 1 {
		return "", fmt.Errorf("%s holds %d boot/vmlinuz-* files", deb, len(found))
	}
	if err := os.Rename(found[0], dst); err != nil {
		return "", err
	}
	return strings.TrimPrefix(filepath.Base(found[0]), "vmlinuz-"), nil
}

func loadKernel(dir string) (Kernel, error) {
	var k Kernel
	meta, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		return k, err
	}
	if err := json.Unmarshal(meta, &k); err != nil {
		return k, fmt.Errorf("%s: %w", filepath.Join(dir, "kernel.json"), err)
	}
	k.Dir = dir
	k.Deb = filepath.Join(dir, "linux-image.deb")
	k.Bzimage = filepath.Join(dir, "vmlinuz")
	if k.Vmlinux != "" {
		k.Vmlinux = filepath.Join(dir, k.Vmlinux)
	}
	for _, f := range []string{k.Deb, k.BootImage()} {
		if _, err := os.Stat(f); err != nil {
			return k, err
		}
	}
	return k, nil
}

// sharedKernel is the kernel called name (PACKAGE_VERSION) in root's cache,
// when cacheDir is another user's default cache. It is used as it is: root's
// cache is not written, not even to mark the kernel used.
func sharedKernel(cacheDir, name string) (Kernel, error) {
	shared := sharedCacheDir(cacheDir)
	if shared == "" {
		return Kernel{}, errors.New("no shared cache")
	}
	return loadKernel(filepath.Join(shared, "kernel", name))
}

// CachedKernel returns the kernel in cacheDir used last, the one a run takes
// when apt cannot name a newer one; when cacheDir, another user's default
// cache, has none, the one in root's cache used last.
func CachedKernel(cacheDir string) (Kernel, error) {
	k, err := newestKernel(cacheDir)
	if err == nil {
		return k, nil
	}
	if shared := sharedCacheDir(cacheDir); shared != "" {
		if k, serr := newestKernel(shared); serr == nil {
			return k, nil
		}
	}
	return Kernel{}, err
}

// newestKernel is the kernel in cacheDir used last.
func newestKernel(cacheDir string) (Kernel, error) {
	dirs, _ := filepath.Glob(filepath.Join(cacheDir, "kernel", "linux-image-*"))
	type cand struct {
		k   Kernel
		mod int64
	}
	var cands []cand
	for _, d := range dirs {
		k, err := loadKernel(d)
		if err != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join(d, "kernel.json"))
		if err != nil {
			continue
		}
		cands = append(cands, cand{k, fi.ModTime().UnixNano()})
	}
	if len(cands) == 0 {
		return Kernel{}, errors.New("none found")
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].mod > cands[j].mod })
	return cands[0].k, nil
}
