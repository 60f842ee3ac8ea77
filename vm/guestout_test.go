package vm

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

type tarEntry struct {
	hdr  tar.Header
	body string
}

func tarOf(t *testing.T, entries ...tarEntry) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.Size = int64(len(e.body))
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes())
}

func TestExtractOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	err := extractOut(tarOf(t,
		tarEntry{hdr: tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}},
		tarEntry{hdr: tar.Header{Name: "./sub/", Typeflag: tar.TypeDir, Mode: 0o755}},
		tarEntry{hdr: tar.Header{Name: "./sub/report.txt", Typeflag: tar.TypeReg}, body: "report\n"},
		tarEntry{hdr: tar.Header{Name: "./run.sh", Typeflag: tar.TypeReg, Mode: 0o755}, body: "#!/bin/sh\n"},
		tarEntry{hdr: tar.Header{Name: "./link", Typeflag: tar.TypeSymlink, Linkname: "sub/report.txt"}},
		tarEntry{hdr: tar.Header{Name: "./hard", Typeflag: tar.TypeLink, Linkname: "./run.sh"}},
	), dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub/report.txt")); err != nil || string(b) != "report\n" {
		t.Errorf("sub/report.txt: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v, %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "link")); err != nil || target != "sub/report.txt" {
		t.Errorf("link -> %q, %v", target, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hard")); err != nil || string(b) != "#!/bin/sh\n" {
		t.Errorf("hard: %q, %v", b, err)
	}
}

// A guest's /out is the guest's to fill; nothing in it may write outside OutDir.
func TestExtractOutStaysInsideDir(t *testing.T) {
	for name, archive := range map[string][]tarEntry{
		"dot-dot name": {
			{hdr: tar.Header{Name: "../escaped.txt", Typeflag: tar.TypeReg}, body: "x"},
		},
		"write through symlink": {
			{hdr: tar.Header{Name: "./out-link", Typeflag: tar.TypeSymlink, Linkname: "../outside"}},
			{hdr: tar.Header{Name: "./out-link/escaped.txt", Typeflag: tar.TypeReg}, body: "x"},
		},
		"hard link to outside": {
			{hdr: tar.Header{Name: "./h", Typeflag: tar.TypeLink, Linkname: "../outside/secret"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			outside := filepath.Join(parent, "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := extractOut(tarOf(t, archive...), filepath.Join(parent, "out"))
			if err == nil {
				t.Error("extractOut accepted an entry that leaves the directory")
			}
			for _, p := range []string{filepath.Join(parent, "escaped.txt"), filepath.Join(outside, "escaped.txt")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s was written outside the out directory", p)
				}
			}
			if _, err := os.Stat(filepath.Join(parent, "out", "h")); err == nil {
				t.Error("a hard link to a file outside the out directory was made")
			}
		})
	}
}
