package cachedir

import (
	"os"
	"path/filepath"
	"strconv"
)

// Env names the environment variable that gives the cache's root. It comes
// first: svclab re-executed in a user namespace (internal/rootless) is uid 0
// there but may not write root's System, so the user's cache is handed down.
const Env = "SVCLAB_CACHE_DIR"

// System is root's cache, as it always was. An ordinary user's runs read the
// entries root made there (they are world-readable) instead of making them
// again, and write only to their own cache.
const System = "/var/cache/svclab"

// Root is the directory svclab's caches go under for this process: $SVCLAB_CACHE_DIR;
// else, as root, System; else $XDG_CACHE_HOME/svclab, else ~/.cache/svclab, else
// (a user without a home, as nobody) /tmp/svclab-cache-UID. It creates nothing.
func Root() string {
	return root(os.Geteuid(), os.Getuid(), os.Getenv, isDir)
}

// root is Root's choice as a function of what it looks at, for tests.
func root(euid, uid int, getenv func(string) string, isDir func(string) bool) string {
	if d := getenv(Env); d != "" {
		// Absolute, so it stays right whatever directory a component runs in.
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	if euid == 0 {
		return System
	}
	// The XDG spec says to ignore a relative $XDG_CACHE_HOME.
	if d := getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "svclab")
	}
	if h := getenv("HOME"); h != "" && isDir(h) {
		return filepath.Join(h, ".cache", "svclab")
	}
	return filepath.Join(os.TempDir(), "svclab-cache-"+strconv.Itoa(uid))
}

// Fallback is the directory a run also reads entries from when it uses the
// default cache (dir is own, the default's directory for that kind of entry)
// and that is not root's: system, the same directory of root's cache. It is ""
// when dir was chosen explicitly (--cache, a test's), which then is the only
// place looked in, and when dir is root's cache itself.
func Fallback(dir, own, system string) string {
	if filepath.Clean(dir) != filepath.Clean(own) || filepath.Clean(dir) == filepath.Clean(system) {
		return ""
	}
	return system
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
