// Package rootless runs svclab without root: a command that needs the kernel
// re-executes svclab in a user namespace of its own (the user mapped to root
// inside) and a mount namespace, where every lab namespace is made, as
// kubernetes#130926 asks of a rootless network test. Inside, /run is a tmpfs of
// the run's own: /run/netns holds the lab's namespaces, seen by no one outside,
// /run/xtables.lock is the run's own lock, and /run/svclab is the user's state
// directory ($XDG_RUNTIME_DIR/svclab), so that later commands find the user's
// labs and no one else's; the run's network namespace is its own too. A
// command on a running lab joins its owner's namespaces (nsenter), as rootless
// container engines join theirs.
//
// As root nothing changes: Needed is false.
package rootless

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/svclab/svclab/internal/cachedir"
	"golang.org/x/sys/unix"
)

// envInside is set in the environment of a svclab started inside its user
// namespace: "new" for one it made, "joined" for a lab owner's it joined.
const envInside = "SVCLAB_USERNS"

// envState passes the state directory into a new user namespace, where Setup
// mounts it on /run/svclab.
const envState = "SVCLAB_STATE_DIR"

// envMappingFD names the descriptor on which a new user namespace's first
// process waits until its ID mappings are written (by newuidmap and
// newgidmap, from outside).
const envMappingFD = "SVCLAB_USERNS_MAPPING_FD"

// Inside says this process runs in a user namespace svclab made or joined.
func Inside() bool { return os.Getenv(envInside) != "" }

// Needed says svclab runs without root and outside its user namespace: a
// command that needs the kernel must Run or Join first.
func Needed() bool { return os.Geteuid() != 0 && !Inside() }

// StateDir is where an ordinary user's labs are recorded:
// $XDG_RUNTIME_DIR/svclab, or /tmp/svclab-UID where no runtime directory is
// set (a user without a login session: CI's).
func StateDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "svclab")
	}
	return filepath.Join(os.TempDir(), "svclab-"+strconv.Itoa(os.Getuid()))
}

// ErrNoUserNamespace says this host does not let an ordinary user make a user
// namespace, and what to do.
var ErrNoUserNamespace = errors.New("svclab runs without root in a user namespace of its own, and this host refuses one " +
	"(check: unshare -Ur true; user.max_user_namespaces must be above 0, kernel.unprivileged_userns_clone 1 where it exists, " +
	"kernel.apparmor_restrict_unprivileged_userns 0 where it exists); or run svclab as root")

// Run runs svclab with args in a new user, mount and network namespace,
// where it is root, and returns its exit status. Interrupts reach the child,
// which tears down what it made; its namespaces go with it. The network
// namespace is the run's own "host": svclab switches between the lab's
// namespaces and back to the one it started in, which must be one its user
// namespace owns; and nothing of the run reaches the host's network.
//
// The user is root inside; a user with a subordinate ID range (/etc/subuid,
// /etc/subgid) and newuidmap/newgidmap has that range mapped from ID 1 up, as
// rootless Podman maps it, so that other users exist inside (a spec acting as
// nobody in the suite run this way). Without one, the user alone is mapped.
func Run(args []string) (int, error) {
	state := StateDir()
	if err := os.MkdirAll(state, 0o700); err != nil {
		return 0, fmt.Errorf("the state directory of svclab without root: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, args...)
	// The user's cache, chosen out here: inside, the user is root and would
	// pick root's, which it may not write.
	cmd.Env = append(os.Environ(), envInside+"=new", envState+"="+state, cachedir.Env+"="+cachedir.Root())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET}
	ids, err := subordinateIDs()
	if err != nil {
		return 0, err
	}
	var mapped func(pid int) error
	if ids == nil {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		// A single mapping is all an ordinary user may write, and only
		// with setgroups denied.
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	} else {
		mapped = ids.write
	}
	code, err := runChild(cmd, mapped)
	if err != nil && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EACCES)) {
		return 0, fmt.Errorf("%w: %v", ErrNoUserNamespace, err)
	}
	return code, err
}

// Join runs svclab with args in the user, mount and network namespaces of
// process pid (a lab's owner), where the lab's namespaces are, and returns its
// exit status.
func Join(pid int, args []string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return 0, errors.New("svclab without root joins a running lab's namespaces with nsenter, which is missing: install util-linux")
	}
	cmd := exec.Command(nsenter, append([]string{"--target", strconv.Itoa(pid), "--user", "--mount", "--net",
		// The user's own IDs, which are root's in the owner's namespace:
		// nsenter's setgroups, which that namespace denies (Run maps one
		// group without a subordinate range), is not called.
		"--preserve-credentials", "--", self}, args...)...)
	cmd.Env = append(os.Environ(), envInside+"=joined", cachedir.Env+"="+cachedir.Root())
	return runChild(cmd, nil)
}

// runChild runs cmd on this process's standard streams, passing on
// interrupts, and returns its exit status. When mapped is not nil, the child
// waits, before anything else, until mapped has written its ID mappings
// (WaitForMappings).
func runChild(cmd *exec.Cmd, mapped func(pid int) error) (int, error) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	var release *os.File
	if mapped != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		defer r.Close()
		defer w.Close()
		cmd.ExtraFiles = []*os.File{r}
		cmd.Env = append(cmd.Env, envMappingFD+"=3")
		release = w
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if mapped != nil {
		if err := mapped(cmd.Process.Pid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, err
		}
		release.Write([]byte{1})
		release.Close()
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	}
	return 0, err
}

// HostPath is where path, a path under /run/svclab inside a user namespace
// Run made, is for the user outside it: under their state directory. Other
// paths, and every path as root, are the same outside.
func HostPath(path string) string {
	state := os.Getenv(envState)
	if state == "" {
		return path
	}
	rel, err := filepath.Rel("/run/svclab", path)
	if err != nil || rel == ".." || len(rel) > 2 && rel[:3] == "../" {
		return path
	}
	return filepath.Join(state, rel)
}

// Setup prepares a new user namespace's mounts, first thing in the child Run
// started: nothing it mounts propagates to the host; /run is a tmpfs of the
// run's own (the namespaces' files under /run/netns, the xtables lock), and
// /run/svclab the user's state directory. In a joined namespace, or outside
// one, it does nothing.
func Setup() error {
	if os.Getenv(envInside) != "new" {
		return nil
	}
	if err := waitForMappings(); err != nil {
		return err
	}
	// Once: a svclab this one starts (a spec's, under `svclab unshare`) is
	// inside already, in these mounts.
	os.Setenv(envInside, "ready")
	state := os.Getenv(envState)
	// Opened before /run is covered: the state directory is often under it
	// (/run/user/UID).
	dir, err := os.Open(state)
	if err != nil {
		return fmt.Errorf("rootless: the state directory: %w", err)
	}
	defer dir.Close()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("rootless: make the mounts private: %w", err)
	}
	if err := unix.Mount("svclab", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("rootless: a tmpfs on /run: %w", err)
	}
	for _, d := range []string{"/run/netns", "/run/svclab"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("rootless: %w", err)
		}
	}
	src := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd()))
	if err := unix.Mount(src, "/run/svclab", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("rootless: mount the state directory %s on /run/svclab: %w", state, err)
	}
	// The run's network namespace starts with lo down; a program run in it
	// (the ginkgo CLI's parallel processes report to a server on 127.0.0.1)
	// expects it up, as in any host's.
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("rootless: bring lo up in the run's network namespace: %w", err)
	}
	return nil
}
