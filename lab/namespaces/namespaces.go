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

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netns"
)

// Dir is where named network namespaces live (iproute2's NETNS_RUN_DIR).
const Dir = "/run/netns"

// Path is the bind mount of the namespace called name.
func Path(name string) string { return filepath.Join(Dir, name) }

// Create makes the named network namespace. The calling goroutine's thread is not
// moved: the work happens on a locked thread of its own, which is thrown away if it
// cannot be switched back (the CNI plugins' rule for namespace-switching threads).
func Create(name string) error {
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

// Do runs fn on a thread switched into the named namespace. Sockets opened in fn stay
// in that namespace and may be used from any goroutine afterwards; goroutines started
// in fn do not inherit the namespace. A process started in fn does.
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

// Output runs a program inside the named namespace and returns its standard output;
// on failure the error carries its standard error.
func Output(name string, argv ...string) ([]byte, error) {
	var out []byte
	err := Do(name, func() error {
		cmd := exec.Command(argv[0], argv[1:]...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var err error
		out, err = cmd.Output()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(stderr.Bytes()))
		}
		return nil
	})
	return out, err
}
