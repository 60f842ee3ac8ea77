package vm

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultCacheDir holds kernels, guest images and the accelerator verdicts.
const DefaultCacheDir = "/var/cache/svclab"

// lockCache takes an exclusive lock on cacheDir, so that two runs (two test
// processes, a test and the CLI) do not download or build the same thing at once.
// Readers of finished entries need no lock: entries appear by rename.
func lockCache(cacheDir string) (unlock func(), err error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("cache %s: %w", cacheDir, err)
	}
	f, err := os.OpenFile(filepath.Join(cacheDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", cacheDir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("cache %s: lock: %w", cacheDir, err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// logger writes the runner's one-line progress messages; a nil writer drops them.
type logger struct{ w io.Writer }

func (l logger) printf(format string, args ...any) {
	if l.w == nil {
		return
	}
	fmt.Fprintf(l.w, "vm: "+format+"\n", args...)
}

// writeFileAtomic replaces file with data so that readers see the old or the new
// content, never a part.
func writeFileAtomic(file string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(file), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), file)
}

// staleAfter is how long a cached kernel or image may go unused before it is
// removed; removal happens when a new one is made, under the cache lock.
const staleAfter = 7 * 24 * time.Hour

// touch marks a cache entry as used now.
func touch(file string) {
	now := time.Now()
	os.Chtimes(file, now, now)
}

// pruneCache removes entries matching pattern whose stamp file (the entry
// itself, or stamp inside it) was not touched within staleAfter, except keep, and
// leftovers of builds that died (names starting with ".build-" or ".fetch-").
// The caller holds the cache lock.
func pruneCache(dir, pattern, stamp, keep string, lg logger) {
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".build-*"))
	fetches, _ := filepath.Glob(filepath.Join(dir, ".fetch-*"))
	for _, p := range append(leftovers, fetches...) {
		os.RemoveAll(p)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, pattern))
	for _, p := range entries {
		if p == keep {
			continue
		}
		fi, err := os.Stat(filepath.Join(p, stamp))
		if err != nil || time.Since(fi.ModTime()) < staleAfter {
			continue
		}
		if err := os.RemoveAll(p); err == nil {
			lg.printf("removed %s, unused for %s", p, time.Since(fi.ModTime()).Round(time.Hour))
		}
	}
}
