package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/svclab/svclab/internal/cachedir"
	"golang.org/x/sys/unix"
)

// Version is the Kubernetes release the components module (components/go.mod) pins;
// TestVersionMatchesComponents keeps the two equal.
const Version = "v1.37.2"

// DefaultCacheDir holds built component binaries: root's /var/cache/svclab/kube,
// an ordinary user's under $XDG_CACHE_HOME/svclab or ~/.cache/svclab (see
// cachedir.Root). Set once at start, which is when $SVCLAB_CACHE_DIR is given.
var DefaultCacheDir = filepath.Join(cachedir.Root(), "kube")

// systemCacheDir is root's cache of component binaries. A run with the default
// cache of another user uses a binary root built there rather than spend many
// minutes building the same one again; it never writes there. A variable for
// tests.
var systemCacheDir = filepath.Join(cachedir.System, "kube")

// BinaryEnv names the environment variable that, like --kube-binary, gives a
// component binary to use instead of building one.
const BinaryEnv = "SVCLAB_KUBE_BINARY"

// SourceEnv names the environment variable that gives the svclab source tree (the
// directory holding components/go.mod) when it is not found by walking up from the
// executable or the working directory.
const SourceEnv = "SVCLAB_SOURCE"

// Options says where the component binary comes from.
type Options struct {
	// Path is a binary to use as it is (--kube-binary); empty: $SVCLAB_KUBE_BINARY,
	// else the cache, else a build.
	Path string
	// CacheDir holds built binaries; empty: DefaultCacheDir, and then root's
	// cache is read too when DefaultCacheDir is another user's.
	CacheDir string
	// Log receives progress lines (a build takes minutes); nil drops them.
	Log io.Writer
	// NoBuild returns ErrNotBuilt instead of building (to report on what is
	// there without minutes of work).
	NoBuild bool
}

// ErrNotBuilt is Binary's answer, with NoBuild, when no binary of this source
// tree's components is built yet.
var ErrNotBuilt = errors.New("the Kubernetes components are not built yet (built on first use, or now by `svclab kube-binary`)")

// Binary returns the path of a svclab-kube binary: the one Options.Path or
// $SVCLAB_KUBE_BINARY names (checked by running its version command), else the
// cached build of this source tree's components (keyed by Version and a hash of
// components/go.mod, go.sum and *.go), else a new build into the cache. Two runs
// asking at once build once: the build holds a lock on the cache, and the binary
// appears by rename.
func Binary(ctx context.Context, o Options) (string, error) {
	path, checked, err := BinaryChecked(ctx, o)
	if err != nil {
		return "", err
	}
	if c := <-checked; c.Err != nil {
		return "", c.Err
	}
	return path, nil
}

// BinaryCheck is the outcome of a component binary's check.
type BinaryCheck struct {
	// Err says why the binary is no component binary (or did not run).
	Err error
	// WaitFor says the binary takes `--wait-for FILE` before its command
	// (WaitForArgs): a lab may fork its components before the API server is
	// ready. A binary built from this tree does; one given by path does when
	// its version command lists the option (an older build does not).
	WaitFor bool
}

// BinaryChecked is Binary for a caller with other work to do meanwhile (a
// lab starts the API server): the version check of a given binary, which
// takes from a fraction of a second to seconds on a loaded machine, runs in
// the background, and its outcome arrives on the channel, which the caller
// must read before it trusts the binary; a cached or built binary is checked
// by nothing, and its channel holds no error and WaitFor (it is built from
// this tree's components).
func BinaryChecked(ctx context.Context, o Options) (string, <-chan BinaryCheck, error) {
	checked := make(chan BinaryCheck, 1)
	path := o.Path
	if path == "" {
		path = os.Getenv(BinaryEnv)
	}
	if path != "" {
		// Absolute, so it stays right whatever directory a component runs in.
		abs, err := exec.LookPath(path)
		if err == nil {
			abs, err = filepath.Abs(abs)
		}
		if err != nil {
			return "", nil, fmt.Errorf("kube binary %s: %w", path, err)
		}
		go func() { checked <- checkBinary(ctx, abs) }()
		return abs, checked, nil
	}
	checked <- BinaryCheck{WaitFor: true}
	cacheDir := o.CacheDir
	if cacheDir == "" {
		cacheDir = DefaultCacheDir
	}
	shared := cachedir.Fallback(cacheDir, DefaultCacheDir, systemCacheDir)
	lg := logger{o.Log}
	src, srcErr := findSource()
	if srcErr != nil {
		// An installed svclab without its source tree can still use what an earlier
		// run built for this version.
		if cached := newestCached(cacheDir, shared); cached != "" {
			lg.printf("no source tree (%v); using the cached %s", srcErr, cached)
			return cached, checked, nil
		}
		return "", nil, fmt.Errorf("the Kubernetes components (%s) are not built yet and %w; or give a built svclab-kube with --kube-binary PATH or $%s", Version, srcErr, BinaryEnv)
	}
	key, err := sourceKey(src)
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(cacheDir, cachedName(key))
	if found := findCached(cachedName(key), cacheDir, shared); found != "" {
		return found, checked, nil
	}
	if o.NoBuild {
		return "", nil, ErrNotBuilt
	}
	unlock, err := lockDir(ctx, cacheDir, lg)
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	// Another run may have built it while this one waited for the lock.
	if found := findCached(cachedName(key), cacheDir, shared); found != "" {
		return found, checked, nil
	}
	if err := build(ctx, src, bin, lg); err != nil {
		return "", nil, err
	}
	prune(cacheDir, bin, lg)
	return bin, checked, nil
}

// checkBinary runs path's version command, so a wrong --kube-binary fails before
// a lab is built around it. Its first run reads the whole binary (about 150 MB):
// an emulated VM on a loaded host took over 30 s to do it, hence the long bound.
func checkBinary(ctx context.Context, path string) BinaryCheck {
	v, err := Versions(ctx, path)
	return BinaryCheck{Err: err, WaitFor: slices.ContainsFunc(v, func(line string) bool {
		name, opts, _ := strings.Cut(line, " ")
		return name == "svclab-kube" && slices.Contains(strings.Fields(opts), "--wait-for")
	})}
}

// WaitForArgs are the arguments of a svclab-kube command (args, the command
// word first) that runs once the file waitFor exists, having done its package
// initialisation before: args as they are when waitFor is empty. Only a binary
// whose BinaryCheck says WaitFor takes them.
func WaitForArgs(waitFor string, args []string) []string {
	if waitFor == "" {
		return args
	}
	return append([]string{"--wait-for", waitFor}, args...)
}

// Versions are what the component binary at path says of its components, one
// "NAME VERSION" line each (kubernetes, etcd, coredns, go).
func Versions(ctx context.Context, path string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("kube binary %s: %s version: %w: %s", path, path, err, strings.TrimSpace(string(out)))
	}
	if !strings.Contains(string(out), "kubernetes ") {
		return nil, fmt.Errorf("kube binary %s: its version command printed %q, not a svclab-kube's versions", path, strings.TrimSpace(string(out)))
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), nil
}

// cachedName is the file name of the build of sources with the given key.
func cachedName(key string) string { return "svclab-kube-" + Version + "-" + key }

// findCached returns the binary called name in cacheDir, else in shared (root's
// cache, or ""), else "". Only an entry of cacheDir is marked as used: shared
// is root's, which this run must not write, and root's own runs keep it fresh.
func findCached(name, cacheDir, shared string) string {
	if p := filepath.Join(cacheDir, name); isFile(p) && cachedir.Owned(cacheDir) == nil {
		cachedir.Touch(p)
		return p
	}
	if shared == "" {
		return ""
	}
	if p := filepath.Join(shared, name); isFile(p) {
		return p
	}
	return ""
}

// newestCached returns the most recently used cached binary of Version in
// cacheDir, else in shared (root's cache, or ""), else "".
func newestCached(cacheDir, shared string) string {
	if p := newestIn(cacheDir); p != "" && cachedir.Owned(cacheDir) == nil {
		cachedir.Touch(p)
		return p
	}
	if shared == "" {
		return ""
	}
	return newestIn(shared)
}

func newestIn(dir string) string {
	matches, _ := filepath.Glob(filepath.Join(dir, "svclab-kube-"+Version+"-*"))
	sort.Slice(matches, func(i, j int) bool { return modTime(matches[i]).After(modTime(matches[j])) })
	if len(matches) == 0 {
		return ""
	}
	return matches[0]
}

func modTime(p string) time.Time {
	fi, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// prune removes cached binaries other than keep that were unused for a week
// (each is about 150 MB, and every change to the components' sources makes a
// new one), and leftovers of builds that died. The caller holds the cache lock.
func prune(cacheDir, keep string, lg logger) {
	cachedir.Prune(cacheDir, "svclab-kube-*", "", keep, func(p string, unused time.Duration) {
		lg.printf("removed %s, unused for %s", p, unused.Round(time.Hour))
	})
}

// logger writes one-line progress messages; a nil writer drops them.
type logger struct{ w io.Writer }

func (l logger) printf(format string, args ...any) {
	if l.w == nil {
		return
	}
	fmt.Fprintf(l.w, "kube: "+format+"\n", args...)
}

// goEnv is what the go command building the components into cacheDir needs
// added to its environment (getenv reads svclab's): its build and module caches
// under cacheDir when it would find no place of its own for them. Go puts them
// under $GOCACHE or $XDG_CACHE_HOME or $HOME/.cache, and $GOMODCACHE or
// $GOPATH/pkg/mod or $HOME/go/pkg/mod; a user without a home (nobody's is
// /nonexistent) has none of these, and the build would fail after the 13
// minutes' worth of nothing it could cache.
func goEnv(cacheDir string, getenv func(string) string) []string {
	home := getenv("HOME")
	// A home the user may not write (HOME=/ of some system users) is none.
	hasHome := home != "" && isDirectory(home) && unix.Access(home, unix.W_OK) == nil
	var env []string
	if getenv("GOCACHE") == "" && !filepath.IsAbs(getenv("XDG_CACHE_HOME")) && !hasHome {
		env = append(env, "GOCACHE="+filepath.Join(cacheDir, "go", "build"))
	}
	if getenv("GOMODCACHE") == "" && getenv("GOPATH") == "" && !hasHome {
		env = append(env, "GOMODCACHE="+filepath.Join(cacheDir, "go", "mod"))
	}
	return env
}

func isDirectory(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
