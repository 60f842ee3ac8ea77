// Package namespaces creates, enters and removes the named network namespaces a lab
// is made of. They are bind-mounted under /run/netns as `ip netns add` does, so
// `ip netns exec` and `svclab exec` reach them and they outlive a killed process
// until `svclab clean` removes them.
package namespaces

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where named network namespaces live (iproute2's NETNS_RUN_DIR).
const Dir = "/run/netns"

// Path is the bind mount of the namespace called name.
func Path(name string) string { return filepath.Join(Dir, name) }

// Create makes the named network namespace. The calling goroutine's thread is not
// moved: the work happens on a locked thread of its own, which is thrown away if it
// cannot be switched back (the CNI plugins' rule for namespace-switching threads).
func Create(name string) error {
	if err := shareDir(); err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("netns %s: read current namespace: %w", name, err)
			return
		}
		defer orig.Close()
		created, err := netns.NewNamed(name)
		if created.IsOpen() {
			created.Close()
		}
		if serr := netns.Set(orig); serr != nil {
			// Leave the thread locked: the runtime discards it when this goroutine ends.
			errc <- errors.Join(err, fmt.Errorf("netns %s: switch back: %w", name, serr))
			return
		}
		runtime.UnlockOSThread()
		if err != nil {
			// NewNamed may fail after the file exists (the bind mount); leave nothing.
			_ = Delete(name)
			errc <- fmt.Errorf("netns %s: create: %w", name, err)
			return
		}
		errc <- nil
	}()
	return <-errc
}

// shareDir makes Dir a mount point of its own with shared propagation, as
// iproute2's `ip netns add` does before its first namespace (mount --make-rshared,
// after a recursive bind of Dir onto itself when Dir is no mount point yet).
// Doing it first, the same way, matters: a non-recursive bind of Dir made by
// another tool after svclab's namespaces would hide their mounts under it, and
// they could no longer be unmounted by name.
func shareDir() error {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		if err := unix.Mount(Dir, Dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s onto itself: %w", Dir, err)
		}
		err = unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return fmt.Errorf("make %s shared: %w", Dir, err)
	}
	return nil
}

// Delete removes the named namespace. The kernel frees the namespace, and every
// interface in it, once nothing refers to it any more. A missing namespace is no error.
func Delete(name string) error {
	p := Path(name)
	if err := netns.DeleteNamed(name); err != nil {
		if _, statErr := os.Stat(p); errors.Is(statErr, fs.ErrNotExist) {
			return nil
		}
		// A file that is no longer (or never was) a mount point still has to go.
		if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			return fmt.Errorf("netns %s: delete: %w", name, errors.Join(err, rmErr))
		}
	}
	return nil
}

// Exists tells whether the named namespace is present.
func Exists(name string) bool {
	_, err := os.Stat(Path(name))
	return err == nil
}

// Mounted tells whether the named namespace is there: its file holds a
// network namespace (nsfs). Exists is not enough to say a lab's namespace is
// whole: a deletion unmounts the namespace, then removes the file, and a
// look between the two finds a plain file (seen under load: a trace's open
// failed with "unknown FS magic", while the lab still looked whole).
func Mounted(name string) bool {
	var st unix.Statfs_t
	return unix.Statfs(Path(name), &st) == nil && st.Type == unix.NSFS_MAGIC
}

// List returns the named namespaces whose names start with prefix, sorted.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", Dir, err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Do is NS.Do for the named namespace, without opening a netlink handle.
func Do(name string, fn func() error) error {
	err := cnins.WithNetNSPath(Path(name), func(cnins.NetNS) error { return fn() })
	if err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	return nil
}

// Sysctl writes net sysctls inside the named namespace. Keys are dotted, as sysctl(8)
// takes them ("net.ipv4.ip_forward"). /proc/sys/net resolves against the writing
// thread's namespace, so the root namespace is never touched.
func Sysctl(name string, settings []Setting) error {
	return Do(name, func() error {
		for _, s := range settings {
			if err := writeSysctl(s.Key, s.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

// Setting is one sysctl key and value.
type Setting struct{ Key, Value string }

// ReadSysctl reads one net sysctl inside the named namespace.
func ReadSysctl(name, key string) (string, error) {
	var v string
	err := Do(name, func() (err error) {
		v, err = ReadSysctlHere(key)
		return err
	})
	return v, err
}

// ReadSysctlHere reads a sysctl (dotted key) of the calling thread's network
// namespace: for code already inside Do.
func ReadSysctlHere(key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(key))
	return strings.TrimSpace(string(b)), err
}

// EnsureSysctlHere sets a sysctl (dotted key) of the calling thread's network
// namespace unless it has the value already, as kube-proxy's EnsureSysctl does.
func EnsureSysctlHere(key, value string) error {
	if cur, err := ReadSysctlHere(key); err == nil && cur == value {
		return nil
	}
	return writeSysctl(key, value)
}

func writeSysctl(key, value string) error {
	if err := os.WriteFile(sysctlPath(key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

func sysctlPath(key string) string { return "/proc/sys/" + strings.ReplaceAll(key, ".", "/") }

// Output is NS.Output for the named namespace.
func Output(name string, argv ...string) ([]byte, error) {
	var out []byte
	err := Do(name, func() (err error) {
		out, err = outputHere(argv)
		return err
	})
	return out, err
}

// outputHere runs a program in the calling thread's namespace.
func outputHere(argv []string) ([]byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// Bind puts the file Source over Target for the command Exec runs, as `ip netns
// exec` puts /etc/netns/NAME/resolv.conf over /etc/resolv.conf.
type Bind struct{ Source, Target string }

// Exec replaces this process with argv running inside the named namespace: the
// calling thread enters it, and execve keeps that thread's namespace. With binds,
// the thread also leaves the host's mount namespace for a private copy, in which
// each Source is bind-mounted over its Target: the command sees the files, and
// nothing outside it changes (the copy's mounts are slaves of the host's, so
// none propagates back). It returns only on failure, having changed nothing but
// this thread, which is then left locked so that the runtime discards it.
func Exec(name string, argv, env []string, binds ...Bind) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := enterWith(name, binds); err != nil {
		return err
	}
	return syscall.Exec(path, argv, env)
}

// enterWith moves the calling thread, locked, into the named namespace and,
// with binds, into a private mount namespace with each bind in place: the
// setting Exec and Start run a command in.
func enterWith(name string, binds []Bind) error {
	for _, b := range binds {
		for _, f := range []string{b.Source, b.Target} {
			if _, err := os.Stat(f); err != nil {
				return fmt.Errorf("netns %s: bind %s over %s: %w", name, b.Source, b.Target, err)
			}
		}
	}
	h, err := netns.GetFromPath(Path(name))
	if err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		return fmt.Errorf("netns %s: enter: %w", name, err)
	}
	if len(binds) > 0 {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("netns %s: a private mount namespace: %w", name, err)
		}
		// The copy's mounts are shared with the host's where the host's are
		// (systemd makes / shared): made slaves first, so that the binds below
		// stay in the copy.
		if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("netns %s: make / a slave mount: %w", name, err)
		}
		for _, b := range binds {
			if err := unix.Mount(b.Source, b.Target, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("netns %s: bind %s over %s: %w", name, b.Source, b.Target, err)
			}
		}
	}
	return nil
}
