package vm

import (
	"fmt"
	"io"
	"time"
)

// DefaultCacheDir holds kernels, guest images and the accelerator verdicts.
const DefaultCacheDir = "/var/cache/svclab"

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
