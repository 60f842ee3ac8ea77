package vm

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLdd(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffc3c5f5000)\n" +
		"\tlibmnl.so.0 => /lib/x86_64-linux-gnu/libmnl.so.0 (0x00007f0e1c9f6000)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e1c815000)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f0e1ca2e000)\n"
	libs, err := parseLdd(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "/lib/x86_64-linux-gnu/libmnl.so.0 /lib/x86_64-linux-gnu/libc.so.6 /lib64/ld-linux-x86-64.so.2"
	if got := strings.Join(libs, " "); got != want {
		t.Errorf("parseLdd = %s, want %s", got, want)
	}
	var missing missingLibraryError
	if _, err := parseLdd("\tlibgone.so.1 => not found\n"); !errors.As(err, &missing) || missing.name != "libgone.so.1" {
		t.Errorf("a missing library was reported as %v", err)
	}
}

// sharedLibraries asks the host's real ldd about a real tool.
func TestSharedLibrariesOfIpvsadm(t *testing.T) {
	host, err := findHostTool("ipvsadm")
	if err != nil {
		t.Fatal(err)
	}
	libs, _, err := sharedLibraries(context.Background(), []string{host}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, l := range libs {
		names[filepath.Base(l)] = true
	}
	for _, want := range []string{"libc.so.6", "libnl-genl-3.so.200", "ld-linux-x86-64.so.2"} {
		if !names[want] {
			t.Errorf("libraries of %s lack %s: %v", host, want, libs)
		}
	}
}
