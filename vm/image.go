package vm

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/svclab/svclab/internal/cachedir"
)

//go:embed guest/init.sh
var initScript []byte

// imageFormat changes whenever the layout of the base image changes in a way
// its other inputs do not show, so that cached images built by older code are
// not reused.
const imageFormat = "svclab-vm-image-1"

// guestTool is a host executable copied into the guest.
type guestTool struct {
	name  string   // file name, looked up in the host's sbin and bin directories
	pkg   string   // the Debian package that has it
	dir   string   // guest directory
	links []string // more names in dir for the same program (multi-call binaries)
}

// guestTools are the programs a node of svclab's labs runs. iptables comes with
// both backends; the plain names (iptables, iptables-save, ...) are nft, as on
// Debian and in kube-proxy's images.
var guestTools = []guestTool{
	{name: "xtables-nft-multi", pkg: "iptables", dir: "usr/sbin", links: []string{
		"iptables", "iptables-save", "iptables-restore",
		"ip6tables", "ip6tables-save", "ip6tables-restore",
		"iptables-nft", "iptables-nft-save", "iptables-nft-restore",
		"ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore",
		// svclab trace reads iptables-nft's trace events with it.
		"xtables-monitor",
	}},
	{name: "xtables-legacy-multi", pkg: "iptables", dir: "usr/sbin", links: []string{
		"iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore",
		"ip6tables-legacy", "ip6tables-legacy-save", "ip6tables-legacy-restore",
	}},
	{name: "ipset", pkg: "ipset", dir: "usr/sbin"},
	{name: "ipvsadm", pkg: "ipvsadm", dir: "usr/sbin"},
	{name: "conntrack", pkg: "conntrack", dir: "usr/sbin"},
	// nft, for kube-proxy's nftables mode (which runs it) and for reading its table.
	{name: "nft", pkg: "nftables", dir: "usr/sbin"},
	{name: "ip", pkg: "iproute2", dir: "usr/bin"},
	{name: "ss", pkg: "iproute2", dir: "usr/bin"},
	{name: "tc", pkg: "iproute2", dir: "usr/sbin"},
	// nstat and tcpdump, to see where a lab's packet is lost: the kernel's drop
	// counters (nstat -az) and the packets on a bridge or veth (tcpdump -Z root:
	// the guest has no tcpdump user to drop privileges to).
	{name: "nstat", pkg: "iproute2", dir: "usr/bin"},
	{name: "tcpdump", pkg: "tcpdump", dir: "usr/bin"},
	// curl, as the seeds use it and as `svclab exec ... -- curl` does in the specs.
	{name: "curl", pkg: "curl", dir: "usr/bin"},
	{name: "dash", pkg: "dash", dir: "usr/bin", links: []string{"sh"}},
	{name: "bash", pkg: "bash", dir: "usr/bin"},
}

// busybox gives the guest its shell for /init and the small tools; the static
// build needs no libraries.
var busybox = guestTool{name: "busybox", pkg: "busybox-static", dir: "usr/bin"}

// hostDataDirs are directories of plugins and tables the tools load at run time;
// each is copied when the host has it.
var hostDataDirs = []string{
	"/usr/lib/*/xtables", // iptables extensions (libxt_*.so), dlopened
	"/usr/lib/*/tc",      // tc's netem distribution tables
	"/etc/iproute2",
	"/usr/share/iproute2",
}

// hostEtcFiles are copied when the host has them: iptables resolves protocol and
// service names and ebtables' ethertypes through them.
var hostEtcFiles = []string{"/etc/protocols", "/etc/services", "/etc/ethertypes"}

// generatedEtc are small files written for the guest rather than copied, since
// the host's versions describe the host (its users, its name service setup).
var generatedEtc = map[string]string{
	"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"etc/group":    "root:x:0:\nnogroup:x:65534:\n",
	"etc/hosts":    "127.0.0.1\tlocalhost svclab\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	"etc/hostname": "svclab\n",
	// A machine has one, if empty: svclab exec binds a pod's resolv.conf over it
	// (the guest has no name server of its own).
	"etc/resolv.conf":   "# svclab's VM has no name server; a lab's pods get their own resolv.conf\n",
	"etc/nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\nethers: files\nrpc: files\n",
}

// hostInputs are the host files a base image is made from.
type hostInputs struct {
	busybox string
	tools   map[string]string // guest path -> host path
	links   map[string]string // guest path -> symlink target
	dirs    map[string]string // guest dir -> host dir
	etc     []string
	extra   []string // host paths of Config.Tools, at the same guest path
}

func findHostTool(name string) (string, error) {
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed on this host (scripts/setup.sh installs it)", name)
}

func collectHostInputs(extraTools []string) (hostInputs, error) {
	in := hostInputs{tools: map[string]string{}, links: map[string]string{}, dirs: map[string]string{}}
	bb, err := findHostTool(busybox.name)
	if err != nil {
		return in, fmt.Errorf("%w (Debian package %s)", err, busybox.pkg)
	}
	in.busybox = bb
	for _, t := range guestTools {
		host, err := findHostTool(t.name)
		if err != nil {
			return in, fmt.Errorf("%w (Debian package %s)", err, t.pkg)
		}
		in.tools[path.Join(t.dir, t.name)] = host
		for _, l := range t.links {
			in.links[path.Join(t.dir, l)] = t.name
		}
	}
	for _, pattern := range hostDataDirs {
		found, _ := filepath.Glob(pattern)
		for _, d := range found {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				in.dirs[guestKey(d)] = d
			}
		}
	}
	for _, f := range hostEtcFiles {
		if _, err := os.Stat(f); err == nil {
			in.etc = append(in.etc, f)
		}
	}
	for _, t := range extraTools {
		host := t
		if !filepath.IsAbs(t) {
			if host, err = exec.LookPath(t); err != nil {
				return in, fmt.Errorf("extra tool %s: %w", t, err)
			}
		}
		host, err = filepath.Abs(host)
		if err != nil {
			return in, err
		}
		in.extra = append(in.extra, host)
	}
	sort.Strings(in.extra)
	return in, nil
}

// hash identifies a base image by everything it is built from: the kernel, this
// code's lists and init script, and the name, size and mtime of every host file
// it copies (libraries follow the tools that need them).
func (in hostInputs) hash(k Kernel) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s %s %s\n", imageFormat, k.Package, k.Version, k.Release)
	h.Write(initScript)
	fmt.Fprintf(h, "\n%q\n%q\n%q\n%q\n%q\n%q\n", moduleTrees, moduleFiles, earlyModules, preloadModules, hostEtcFiles, generatedEtc)
	stamp := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %d %o\n", p, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		return nil
	}
	files := []string{in.busybox}
	files = append(files, in.etc...)
	files = append(files, in.extra...)
	for _, g := range sortedKeys(in.tools) {
		fmt.Fprintf(h, "tool %s\n", g)
		files = append(files, in.tools[g])
	}
	for _, g := range sortedKeys(in.links) {
		fmt.Fprintf(h, "link %s %s\n", g, in.links[g])
	}
	for _, g := range sortedKeys(in.dirs) {
		fmt.Fprintf(h, "dir %s\n", g)
		err := filepath.WalkDir(in.dirs[g], func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return stamp(p)
		})
		if err != nil {
			return "", err
		}
	}
	for _, f := range files {
		if err := stamp(f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// baseImage is the cached, run-independent part of the guest's initramfs.
type baseImage struct {
	Path string
	Hash string
}

// ensureBaseImage returns the cached base image for k and the host's tools,
// building it on a cache miss.
func ensureBaseImage(ctx context.Context, k Kernel, cacheDir string, extraTools []string, lg logger) (baseImage, error) {
	in, err := collectHostInputs(extraTools)
	if err != nil {
		return baseImage{}, fmt.Errorf("guest image: %w", err)
	}
	hash, err := in.hash(k)
	if err != nil {
		return baseImage{}, fmt.Errorf("guest image: %w", err)
	}
	if img, ok := cachedImage(cacheDir, hash, lg); ok {
		return img, nil
	}
	img := baseImage{Path: filepath.Join(cacheDir, "image", hash+".cpio"), Hash: hash}
	// The lock of the directory Prune sweeps, wherever it is reached from
	// (a cache of links to it, as a test's): Prune removes every .build-*
	// there, which only the lock's holder may have under way.
	images := filepath.Dir(img.Path)
	unlock, err := cachedir.Lock(ctx, images, func() { lg.printf("another svclab is filling the cache %s; waiting for it", images) })
	if err != nil {
		return baseImage{}, err
	}
	defer unlock()
	if _, err := os.Stat(img.Path); err == nil {
		lg.printf("guest image %s (cached)", hash)
		return img, nil
	}
	start := time.Now()
	size, nmods, err := buildBaseImage(ctx, k, in, img.Path, lg)
	if err != nil {
		return baseImage{}, fmt.Errorf("guest image %s: %w", hash, err)
	}
	lg.printf("guest image %s built in %.1fs (%.1f MB, %d modules)", hash, time.Since(start).Seconds(), float64(size)/1e6, nmods)
	cachedir.Prune(filepath.Dir(img.Path), "*.cpio", "", img.Path, lg.removed)
	return img, nil
}

// cachedImage is the base image hash in cacheDir, else, when cacheDir is
// another user's default cache, in root's, which is used as it is: root's
// cache is not written, not even to mark the image used.
func cachedImage(cacheDir, hash string, lg logger) (baseImage, bool) {
	if p := filepath.Join(cacheDir, "image", hash+".cpio"); isRegular(p) {
		cachedir.Touch(p)
		lg.printf("guest image %s (cached)", hash)
		return baseImage{Path: p, Hash: hash}, true
	}
	shared := sharedCacheDir(cacheDir)
	if shared == "" {
		return baseImage{}, false
	}
	if p := filepath.Join(shared, "image", hash+".cpio"); isRegular(p) {
		lg.printf("guest image %s (cached by root in %s)", hash, filepath.Dir(p))
		return baseImage{Path: p, Hash: hash}, true
	}
	return baseImage{}, false
}

func buildBaseImage(ctx context.Context, k Kernel, in hostInputs, dst string, lg logger) (size int64, nmods int, err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, 0, err
	}
	work, err := os.MkdirTemp(filepath.Dir(dst), ".build-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(work)

	t, leftOut, err := baseTree(ctx, in)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range leftOut {
		lg.printf("guest image: left out %s: the host cannot load it either", p)
	}
	modRoot, nmods, err := stageModules(ctx, k, work)
	if err != nil {
		return 0, 0, err
	}
	if err := t.hostTree("lib/modules", filepath.Join(modRoot, "lib", "modules"), false); err != nil {
		return 0, 0, err
	}

	tmp := filepath.Join(work, "image.cpio")
	f, err := os.Create(tmp)
	if err != nil {
		return 0, 0, err
	}
	err = t.writeTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, err
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return 0, 0, err
	}
	return fi.Size(), nmods, os.Rename(tmp, dst)
}

// baseTree lays out the guest root: a merged-/usr Debian-like tree with busybox,
// the tools and their libraries, /etc files and /init. Modules are added by the
// caller. leftOut names the plugins the host's own loader could not load, which
// the guest goes without.
func baseTree(ctx context.Context, in hostInputs) (t tree, leftOut []string, err error) {
	t = tree{}
	for _, d := range []string{"usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc/svclab", "proc", "sys", "dev", "run", "svclab", "out", "var", "mnt"} {
		t.dir(d, 0o755)
	}
	t.dir("tmp", 0o1777)
	t.dir("var/tmp", 0o1777)
	t.dir("root", 0o700)
	for _, top := range []string{"bin", "sbin", "lib", "lib64"} {
		t.rawSymlink(top, "usr/"+top)
	}
	t.symlink("var/run", "../run")
	// The kernel opens /dev/console for /init before devtmpfs is mounted.
	t.charDev("dev/console", 0o600, 5, 1)
	t.charDev("dev/null", 0o666, 1, 3)
	t.data("init", 0o755, initScript)
	t.data("etc/svclab/modules.early", 0o644, []byte(strings.Join(earlyModules, "\n")+"\n"))
	t.data("etc/svclab/modules.preload", 0o644, []byte(strings.Join(preloadModules, "\n")+"\n"))
	for _, name := range sortedKeys(generatedEtc) {
		t.data(name, 0o644, []byte(generatedEtc[name]))
	}

	elfs := []string{}
	provided := map[string]bool{}
	for _, g := range sortedKeys(in.tools) {
		if err := t.hostFile(g, in.tools[g], false); err != nil {
			return nil, nil, err
		}
		elfs = append(elfs, in.tools[g])
		provided[path.Base(g)] = true
	}
	for _, g := range sortedKeys(in.links) {
		t.symlink(g, in.links[g])
		provided[path.Base(g)] = true
	}
	for _, h := range in.extra {
		if err := t.hostFile(h, h, false); err != nil {
			return nil, nil, err
		}
		elfs = append(elfs, h)
		provided[path.Base(h)] = true
	}
	var plugins []string
	pluginAt := map[string]string{} // host path -> guest path
	for _, g := range sortedKeys(in.dirs) {
		if err := t.hostTree(g, in.dirs[g], false); err != nil {
			return nil, nil, err
		}
		sos, _ := filepath.Glob(filepath.Join(in.dirs[g], "*.so"))
		for _, so := range sos {
			plugins = append(plugins, so)
			pluginAt[so] = path.Join(g, filepath.Base(so))
		}
	}
	for _, f := range in.etc {
		if err := t.hostFile(f, f, false); err != nil {
			return nil, nil, err
		}
	}
	libs, unloadable, err := sharedLibraries(ctx, elfs, plugins)
	if err != nil {
		return nil, nil, err
	}
	// A plugin needing a library the host lacks cannot load on the host either
	// (iproute2 only recommends libatm1, which tc's q_atm.so needs): the guest
	// goes without it, as the host does.
	for _, so := range sortedKeys(unloadable) {
		delete(t, guestKey(pluginAt[so]))
		leftOut = append(leftOut, fmt.Sprintf("/%s (%v)", pluginAt[so], unloadable[so]))
	}
	for _, l := range libs {
		if err := t.hostFile(l, l, false); err != nil {
			return nil, nil, err
		}
	}

	// Busybox fills in the rest of a userland (mount, modprobe, tar, sleep, ...),
	// but never under a name a real tool has: with /usr/sbin before /usr/bin in
	// PATH, busybox's ip applet would otherwise shadow iproute2's.
	if err := t.hostFile("usr/bin/busybox", in.busybox, false); err != nil {
		return nil, nil, err
	}
	out, err := exec.CommandContext(ctx, in.busybox, "--list-full").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		name := path.Base(applet)
		if !strings.Contains(applet, "/") || provided[name] || name == "busybox" || t.has(applet) {
			continue
		}
		t.symlink(applet, "/usr/bin/busybox")
	}
	return t, leftOut, nil
}

func isRegular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
