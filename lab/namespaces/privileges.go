package namespaces

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
)

// Capability bits from linux/capability.h.
const (
	capNetAdmin = 12
	capSysAdmin = 21
)

// ErrPrivileges says what a lab needs and what to do; commands exit 2 on it.
var ErrPrivileges = errors.New("svclab needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN, to create network " +
	"namespaces, links and rules: run it with sudo, or inside svclab's VM with `svclab vm -- ARGS`")

// CheckPrivileges returns ErrPrivileges unless the process may build labs:
// CAP_NET_ADMIN for links, routes and rules, CAP_SYS_ADMIN for setns and the bind
// mounts that name namespaces.
func CheckPrivileges() error {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return ErrPrivileges
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		hex, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return ErrPrivileges
		}
		if caps&(1<<capNetAdmin) != 0 && caps&(1<<capSysAdmin) != 0 {
			return nil
		}
		return ErrPrivileges
	}
	return ErrPrivileges
}

// InUserNamespace says this process runs in a user namespace other than the
// initial one (svclab without root, internal/rootless): its uid_map maps
// fewer IDs than the initial namespace's whole range.
func InUserNamespace() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return !(len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295")
}
