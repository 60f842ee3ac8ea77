package doctor

import (
	"strings"
	"testing"
)

// The mappings of svclab's user namespace as /proc/self/uid_map prints them:
// the user alone, or with a subordinate range (newuidmap).
func TestMappedIDs(t *testing.T) {
	alone := "         0       1001          1\n"
	if got := mappedIDs(alone); !strings.HasPrefix(got, "none: ") || !strings.Contains(got, "usermod --add-subuids") {
		t.Errorf("only the user mapped: %q", got)
	}
	sub := "         0       1001          1\n         1     100000      65536\n"
	if got, want := mappedIDs(sub), "1-65536 inside are 100000-165535 outside"; got != want {
		t.Errorf("with a subordinate range: %q, want %q", got, want)
	}
}

// Each setting's refusing values, as the kernels document them.
func TestRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		v    int
		want bool
	}{
		{"user.max_user_namespaces", 0, true},
		{"user.max_user_namespaces", 15000, false},
		{"kernel.unprivileged_userns_clone", 0, true},
		{"kernel.unprivileged_userns_clone", 1, false},
		{"kernel.apparmor_restrict_unprivileged_userns", 1, true},
		{"kernel.apparmor_restrict_unprivileged_userns", 0, false},
	} {
		if got := refuses(c.name, c.v); got != c.want {
			t.Errorf("refuses(%s, %d) = %v", c.name, c.v, got)
		}
	}
}
