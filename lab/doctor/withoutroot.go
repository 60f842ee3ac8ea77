package doctor

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// WithoutRoot is what svclab needs of the host to run as an ordinary user
// (internal/rootless): a user namespace per run, and for specs that act as
// another user inside it, a subordinate ID range.
type WithoutRoot struct {
	// UserNamespaces: an ordinary user may make one (tried: as nobody when
	// doctor runs as root; by running in one otherwise).
	UserNamespaces bool `json:"userNamespaces"`
	// Why says what refused it and what to do; empty when allowed.
	Why string `json:"why,omitempty"`
	// Settings are the sysctls that decide it, as read (those this kernel has).
	Settings map[string]string `json:"settings"`
	// SubordinateIDs says, when doctor ran in svclab's user namespace, which
	// IDs beyond the user's own are mapped there; empty as root.
	SubordinateIDs string `json:"subordinateIDs,omitempty"`
	// Limits are host settings that keep a run without root from what a
	// root run does, with the fix.
	Limits []string `json:"limits,omitempty"`
	// Modes says per proxy mode whether it runs without root, or why not.
	Modes map[string]string `json:"modes"`
}

// wantSendBuffer is the default socket send buffer under which an
// iptables-nft restore of kube-proxy's rules for a few hundred Services fits
// in one netlink batch without root (xtables.SendBufferHint).
const wantSendBuffer = 4 << 20

// userNSSettings are the sysctls that let an ordinary user make a user
// namespace, with the value that allows it.
var userNSSettings = []struct{ name, file, allow string }{
	{"user.max_user_namespaces", "/proc/sys/user/max_user_namespaces", "a number above 0"},
	// Debian's kernels before 6.x, and some others.
	{"kernel.unprivileged_userns_clone", "/proc/sys/kernel/unprivileged_userns_clone", "1"},
	// Ubuntu 23.10 and later.
	{"kernel.apparmor_restrict_unprivileged_userns", "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "0"},
}

// withoutRoot finds out what an ordinary user's svclab can do here.
func withoutRoot(ctx context.Context) WithoutRoot {
	w := WithoutRoot{Settings: map[string]string{}, Modes: map[string]string{}}
	var refusing []string
	for _, s := range userNSSettings {
		b, err := os.ReadFile(s.file)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		w.Settings[s.name] = v
		if n, err := strconv.Atoi(v); err == nil && refuses(s.name, n) {
			refusing = append(refusing, fmt.Sprintf("%s is %s (sysctl -w %s=%s)", s.name, v, s.name, fixValue(s.name, s.allow)))
		}
	}
	// The host's (the initial network namespace's only): read as root, or
	// by nobody's doctor outside a refused user namespace.
	if b, err := os.ReadFile("/proc/sys/net/core/wmem_default"); err == nil {
		v := strings.TrimSpace(string(b))
		w.Settings["net.core.wmem_default"] = v
		if n, err := strconv.Atoi(v); err == nil && n < wantSendBuffer {
			w.Limits = append(w.Limits, fmt.Sprintf("net.core.wmem_default is %d: without root, an iptables-nft restore whose netlink batch "+
				"exceeds it fails with \"Message too long\" (kube-proxy's for 30 Services on 3 nodes did, at 212992) (sysctl -w net.core.wmem_default=%d)", n, wantSendBuffer))
		}
	}
	inside := namespaces.InUserNamespace()
	switch {
	case inside:
		w.UserNamespaces = true
		b, _ := os.ReadFile("/proc/self/uid_map")
		w.SubordinateIDs = mappedIDs(string(b))
	default:
		err := tryUserNamespace(ctx)
		w.UserNamespaces = err == nil
		if err != nil {
			w.Why = "an ordinary user's `unshare -Ur true` failed: " + err.Error()
			if len(refusing) > 0 {
				w.Why += "; " + strings.Join(refusing, ", ")
			}
		}
	}
	for _, name := range proxy.Modes() {
		m, err := proxy.Lookup(name)
		if err != nil {
			continue
		}
		switch {
		case !w.UserNamespaces:
			w.Modes[name] = "needs root: this host refuses user namespaces"
		case m.NoUserNamespace != nil:
			w.Modes[name] = "in the VM: " + m.NoUserNamespace.Error()
		default:
			w.Modes[name] = "rootless"
		}
	}
	return w
}

// refuses says a setting's value keeps ordinary users from user namespaces.
func refuses(name string, v int) bool {
	if name == "kernel.apparmor_restrict_unprivileged_userns" {
		return v != 0
	}
	return v == 0
}

func fixValue(name, allow string) string {
	if name == "user.max_user_namespaces" {
		return "15000"
	}
	return allow
}

// tryUserNamespace makes a user namespace as an ordinary user: as nobody when
// this process is root, as itself otherwise.
func tryUserNamespace(ctx context.Context) error {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return fmt.Errorf("unshare (util-linux) is missing")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "-Ur", "true")
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mappedIDs describes the ID mappings of uid_map, a user namespace's, beyond
// root's.
func mappedIDs(uidMap string) string {
	var extra []string
	for _, line := range strings.Split(strings.TrimSpace(uidMap), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] == "0" {
			continue
		}
		in, _ := strconv.Atoi(f[0])
		out, _ := strconv.Atoi(f[1])
		n, _ := strconv.Atoi(f[2])
		extra = append(extra, fmt.Sprintf("%d-%d inside are %d-%d outside", in, in+n-1, out, out+n-1))
	}
	if len(extra) == 0 {
		return "none: only your own ID is mapped, so nothing inside can act as another user (the specs acting as nobody need that): " +
			"usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER, and newuidmap (apt-get install uidmap)"
	}
	return strings.Join(extra, ", ")
}

// write prints the section for people, in WriteText's table.
func (w WithoutRoot) write(tw io.Writer) {
	fmt.Fprintf(tw, "\nwithout root\n")
	if w.UserNamespaces {
		fmt.Fprintf(tw, "  user namespaces\tallowed\n")
	} else {
		fmt.Fprintf(tw, "  user namespaces\trefused: %s\n", w.Why)
	}
	for _, l := range w.Limits {
		fmt.Fprintf(tw, "  limit\t%s\n", l)
	}
	if w.SubordinateIDs != "" {
		fmt.Fprintf(tw, "  subordinate IDs\t%s\n", w.SubordinateIDs)
	}
	for _, name := range slices.Sorted(maps.Keys(w.Modes)) {
		fmt.Fprintf(tw, "  %s\t%s\n", name, w.Modes[name])
	}
}
