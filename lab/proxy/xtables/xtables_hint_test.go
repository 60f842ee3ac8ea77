package xtables

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// kube-proxy's log line and iptables-restore's own output when the batch did
// not fit (kube-proxy v1.37 in iptables mode, iptables-nft 1.8.9, svclab
// without root); any other failure gets no hint.
func TestSendBufferHint(t *testing.T) {
	for _, msg := range []string{
		"E1207 14:24:09.080228   13799 proxier.go:1390] \"Failed to execute iptables-restore\" err=<\n\texit status 1: sendmsg() failed: Message too long\n\tiptables-restore: line 602 failed: Message too long.\n > ipFamily=\"IPv4\"",
		"iptables-restore -w 5 --noflush --counters: exit status 1: sendmsg() failed: Message too long",
	} {
		if h := SendBufferHint(msg); !strings.Contains(h, "sysctl -w net.core.wmem_default=") {
			t.Errorf("no hint for %q", msg)
		}
	}
	if h := SendBufferHint("iptables-restore: line 3 failed: No chain/target/match by that name."); h != "" {
		t.Errorf("a hint for another failure: %q", h)
	}
}

// TestBackendForFamily: the IPv6 proxier runs the ip6tables programs of the
// backend it is given; IPv4 (or no family) keeps iptables'.
func TestBackendForFamily(t *testing.T) {
	for _, tc := range []struct {
		name, family, restore, save string
	}{
		{"", "", "iptables-nft-restore", "iptables-nft-save"},
		{"legacy", "IPv4", "iptables-legacy-restore", "iptables-legacy-save"},
		{"nft", "IPv6", "ip6tables-nft-restore", "ip6tables-nft-save"},
		{"legacy", "IPv6", "ip6tables-legacy-restore", "ip6tables-legacy-save"},
	} {
		b, err := BackendForFamily(tc.name, corev1.IPFamily(tc.family))
		if err != nil || b.Restore != tc.restore || b.Save != tc.save || SaveProgramFor(tc.name, corev1.IPFamily(tc.family)) != tc.save {
			t.Errorf("%q %q: %+v %v", tc.name, tc.family, b, err)
		}
	}
	if _, err := BackendForFamily("iptables-ng", corev1.IPv6Protocol); err == nil {
		t.Error("unknown backend accepted")
	}
}
