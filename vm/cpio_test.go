package vm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The archive is checked with the real cpio tool, which reads newc as the kernel
// does.
func TestTreeWritesNewcArchive(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Fatal("cpio is needed (scripts/setup.sh installs it)")
	}
	host := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(host, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr := tree{}
	tr.rawSymlink("bin", "usr/bin")
	if err := tr.hostFile("/bin/tool", host, false); err != nil {
		t.Fatal(err)
	}
	tr.data("etc/odd", 0o600, []byte("abc")) // 3 bytes: exercises padding
	tr.charDev("dev/console", 0o600, 5, 1)
	tr.symlink("usr/sbin/sh", "dash")

	var buf bytes.Buffer
	if err := tr.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%512 != 0 {
		t.Errorf("archive is %d bytes, not a multiple of 512", buf.Len())
	}
	cmd := exec.Command("cpio", "-itv", "--quiet")
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -itv: %v\n%s", err, out)
	}
	listing := string(out)
	for _, want := range []string{
		"lrwxrwxrwx", "bin -> usr/bin",
		"-rwxr-xr-x", "usr/bin/tool",
		"-rw-------", "etc/odd",
		"crw-------", "5,", "1 ", "dev/console",
		"usr/sbin/sh -> dash",
		"drwxr-xr-x", "usr/sbin",
	} {
		if !strings.Contains(listing, want) {
			t.Errorf("cpio listing lacks %q:\n%s", want, listing)
		}
	}
	// Parents come before children.
	if strings.Index(listing, " usr\n") > strings.Index(listing, "usr/bin/tool") {
		t.Errorf("usr listed after its contents:\n%s", listing)
	}

	dir := t.TempDir()
	x := exec.Command("cpio", "-id", "--quiet", "etc/odd", "usr/bin/tool")
	x.Dir = dir
	x.Stdin = bytes.NewReader(buf.Bytes())
	if out, err := x.CombinedOutput(); err != nil {
		t.Fatalf("cpio -id: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "etc/odd")); string(b) != "abc" {
		t.Errorf("etc/odd = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "usr/bin/tool")); string(b) != "#!/bin/sh\necho hi\n" {
		t.Errorf("usr/bin/tool = %q", b)
	}
}

func TestGuestKeyMergesUsr(t *testing.T) {
	for in, want := range map[string]string{
		"/lib64/ld-linux-x86-64.so.2":     "usr/lib64/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/libc.so.6": "usr/lib/x86_64-linux-gnu/libc.so.6",
		"sbin/modprobe":                   "usr/sbin/modprobe",
		"/usr/bin/ip":                     "usr/bin/ip",
		"/svclab/bin/../data/x":           "svclab/data/x",
		"/library/x":                      "library/x",
		"etc/svclab/run.sh":               "etc/svclab/run.sh",
	} {
		if got := guestKey(in); got != want {
			t.Errorf("guestKey(%q) = %q, want %q", in, got, want)
		}
	}
}
