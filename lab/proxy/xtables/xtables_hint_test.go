package xtables

import (
	"strings"
	"testing"
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
