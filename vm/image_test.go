package vm

import (
	"context"
	"testing"
)

// The guest tree is laid out from this host's real tools; this checks its shape
// without booting.
func TestBaseTreeLayout(t *testing.T) {
	in, err := collectHostInputs([]string{"tr"})
	if err != nil {
		t.Fatal(err)
	}
	tr, _, err := baseTree(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]nodeKind{
		"init":                               kindFile,
		"dev/console":                        kindCharDev,
		"bin":                                kindSymlink,
		"lib64":                              kindSymlink,
		"usr/sbin/xtables-nft-multi":         kindFile,
		"usr/sbin/xtables-monitor":           kindSymlink, // svclab trace's reader of iptables-nft trace events
		"usr/sbin/xtables-legacy-multi":      kindFile,
		"usr/sbin/iptables-legacy-restore":   kindSymlink,
		"usr/sbin/iptables":                  kindSymlink,
		"usr/sbin/ipset":                     kindFile,
		"usr/sbin/ipvsadm":                   kindFile,
		"usr/sbin/conntrack":                 kindFile,
		"usr/sbin/nft":                       kindFile,
		"usr/bin/ip":                         kindFile,
		"usr/bin/nstat":                      kindFile,
		"usr/bin/tcpdump":                    kindFile,
		"usr/bin/sh":                         kindSymlink,
		"usr/sbin/modprobe":                  kindSymlink, // busybox
		"usr/bin/tr":                         kindFile,    // Config.Tools wins over busybox
		"usr/lib64/ld-linux-x86-64.so.2":     kindFile,
		"usr/lib/x86_64-linux-gnu/libc.so.6": kindFile,
		"usr/lib/x86_64-linux-gnu/libnftnl.so.11":              kindFile,
		"usr/lib/x86_64-linux-gnu/xtables/libxt_statistic.so":  kindFile,
		"usr/lib/x86_64-linux-gnu/xtables/libxt_MASQUERADE.so": kindSymlink, // -> libxt_NAT.so, as on Debian
		"usr/lib/x86_64-linux-gnu/xtables/libxt_NAT.so":        kindFile,
		"etc/services":               kindFile,
		"etc/protocols":              kindFile,
		"etc/svclab/modules.preload": kindFile,
	}
	for key, kind := range want {
		n, ok := tr[key]
		if !ok {
			t.Errorf("guest tree lacks /%s", key)
			continue
		}
		if n.kind != kind {
			t.Errorf("/%s is kind %d, want %d", key, n.kind, kind)
		}
	}
	if n := tr["usr/bin/sh"]; n != nil && n.target != "dash" {
		t.Errorf("/usr/bin/sh -> %s, want dash", n.target)
	}
	if n := tr["usr/sbin/iptables"]; n != nil && n.target != "xtables-nft-multi" {
		t.Errorf("/usr/sbin/iptables -> %s, want the nft backend", n.target)
	}
	// No busybox applet may shadow a real tool anywhere on PATH.
	for _, name := range []string{"ip", "tc", "sh", "tr"} {
		for _, dir := range []string{"usr/bin/", "usr/sbin/"} {
			if n := tr[dir+name]; n != nil && n.kind == kindSymlink && n.target == "/usr/bin/busybox" {
				t.Errorf("/%s%s is busybox's applet", dir, name)
			}
		}
	}

	k := Kernel{Package: "linux-image-x", Version: "1", Release: "x"}
	plain, err := collectHostInputs(nil)
	if err != nil {
		t.Fatal(err)
	}
	h1, err := plain.hash(k)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := in.hash(k)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := plain.hash(k); again != h1 {
		t.Error("the image hash is not stable")
	}
	if h1 == h2 {
		t.Error("extra tools do not change the image hash")
	}
}
