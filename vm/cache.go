package vm

import (
	"fmt"
	"io"
	"time"

	"github.com/svclab/svclab/internal/cachedir"
)

// DefaultCacheDir holds kernels, guest images and the accelerator verdicts:
// root's /var/cache/svclab, an ordinary user's $XDG_CACHE_HOME/svclab or
// ~/.cache/svclab (see cachedir.Root). Set once at start, which is when
// $SVCLAB_CACHE_DIR is given.
var DefaultCacheDir = cachedir.Root()

// systemCacheDir is root's cache. A run with the default cache of another user
// takes the kernel and guest image root made there rather than download and
// build them again; it never writes there. A variable for tests.
var systemCacheDir = cachedir.System

// sharedCacheDir is root's cache when cacheDir is the default cache of another
// user, else "" (cacheDir is root's, or was chosen explicitly).
func sharedCacheDir(cacheDir string) string {
	return cachedir.Fallback(cacheDir, DefaultCacheDir, systemCacheDir)
}

// logger writes the runner's one-line progress messages; a nil writer drops them.
type logger struct{ w io.Writer }

func (l logger) printf(format string, args ...any) {
	if l.w == nil {
		return
	}
	fmt.Fprintf(l.w, "vm: "+format+"\n", args...)
}

// removed says that a cache entry unused for a while was removed.
func (l logger) removed(path string, unused time.Duration) {
	l.printf("removed %s, unused for %s", path, unused.Round(time.Hour))
}
