package vm

import (
	"slices"
	"testing"
)

func TestHostMissingNamesQemuAndItsPackage(t *testing.T) {
	missing := HostMissing(t.TempDir(), "svclab-no-such-qemu")
	want := Missing{Program: "svclab-no-such-qemu", Package: "qemu-system-x86"}
	if !slices.Contains(missing, want) {
		t.Errorf("HostMissing = %v, want it to name %v", missing, want)
	}
	if want.String() != "svclab-no-such-qemu (apt-get install qemu-system-x86)" {
		t.Errorf("Missing.String() = %q", want.String())
	}
	for _, m := range missing {
		if m.Package == "" {
			t.Errorf("%s is missing without a package to install", m.Program)
		}
	}
}
