package vm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// sharedCaches points the default cache and root's cache at temporary
// directories, as for an ordinary user whose root has a cache.
func sharedCaches(t *testing.T) (own, system string) {
	t.Helper()
	own, system = filepath.Join(t.TempDir(), "user"), t.TempDir()
	oldDefault, oldSystem := DefaultCacheDir, systemCacheDir
	DefaultCacheDir, systemCacheDir = own, system
	t.Cleanup(func() { DefaultCacheDir, systemCacheDir = oldDefault, oldSystem })
	return own, system
}

// fakeKernel lays out a cached kernel entry named pkg_version under cache,
// last used long ago.
func fakeKernel(t *testing.T, cache, pkg, version string) string {
	t.Helper()
	dir := filepath.Join(cache, "kernel", pkg+"_"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(Kernel{Package: pkg, Version: version, Release: "6.1.0-99-amd64"})
	for name, b := range map[string][]byte{"kernel.json": meta, "linux-image.deb": nil, "vmlinuz": nil} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(filepath.Join(dir, "kernel.json"), old, old)
	return dir
}

// TestKernelFromRootsCache: another user's default cache without a kernel
// takes root's, by name and as the newest cached; a cache chosen explicitly
// does not; the user's own comes first.
func TestKernelFromRootsCache(t *testing.T) {
	own, system := sharedCaches(t)
	roots := fakeKernel(t, system, "linux-image-6.1.0-99-amd64", "6.1.1-1")

	if k, err := sharedKernel(own, "linux-image-6.1.0-99-amd64_6.1.1-1"); err != nil || k.Dir != roots {
		t.Errorf("sharedKernel = %v, %v; want root's %s", k.Dir, err, roots)
	}
	if k, err := CachedKernel(own); err != nil || k.Dir != roots {
		t.Errorf("CachedKernel(own) = %v, %v; want root's %s", k.Dir, err, roots)
	}
	if fi, _ := os.Stat(filepath.Join(roots, "kernel.json")); time.Since(fi.ModTime()) < time.Hour {
		t.Errorf("root's kernel was touched")
	}
	if _, err := os.Stat(own); err == nil {
		t.Errorf("the user's cache %s was made for a lookup", own)
	}
	if _, err := CachedKernel(t.TempDir()); err == nil {
		t.Errorf("an explicit cache without a kernel found one")
	}
	if _, err := sharedKernel(system, "linux-image-6.1.0-99-amd64_6.1.1-1"); err == nil {
		t.Errorf("root's own cache has root's cache as a fallback")
	}

	mine := fakeKernel(t, own, "linux-image-6.1.0-99-amd64", "6.1.1-1")
	if k, err := CachedKernel(own); err != nil || k.Dir != mine {
		t.Errorf("CachedKernel(own) with its own kernel = %v, %v; want %s", k.Dir, err, mine)
	}
}

// TestImageFromRootsCache: the base image of the same inputs in root's cache
// is used as it is; the user's own comes first.
func TestImageFromRootsCache(t *testing.T) {
	own, system := sharedCaches(t)
	const hash = "0123456789abcdef"
	roots := filepath.Join(system, "image", hash+".cpio")
	os.MkdirAll(filepath.Dir(roots), 0o755)
	os.WriteFile(roots, []byte("070701"), 0o644)

	if img, ok := cachedImage(own, hash, logger{}); !ok || img.Path != roots {
		t.Errorf("cachedImage(own) = %v, %v; want root's %s", img, ok, roots)
	}
	if _, ok := cachedImage(t.TempDir(), hash, logger{}); ok {
		t.Errorf("an explicit cache without the image found one")
	}
	if _, ok := cachedImage(own, "fedcba9876543210", logger{}); ok {
		t.Errorf("an image of other inputs was taken")
	}
	if entries, _ := os.ReadDir(filepath.Dir(roots)); !slices.EqualFunc(entries, []string{hash + ".cpio"}, func(e os.DirEntry, n string) bool { return e.Name() == n }) {
		t.Errorf("root's image directory holds %v", entries)
	}
	mine := filepath.Join(own, "image", hash+".cpio")
	os.MkdirAll(filepath.Dir(mine), 0o755)
	os.WriteFile(mine, []byte("070701"), 0o644)
	if img, ok := cachedImage(own, hash, logger{}); !ok || img.Path != mine {
		t.Errorf("cachedImage(own) with its own = %v, %v; want %s", img, ok, mine)
	}
}
