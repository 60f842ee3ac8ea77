package vm

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// sharedLibraries returns every shared library (and the dynamic loader) the given
// ELF files need, as host paths, by asking ldd. Statically linked files need
// none. ldd runs the dynamic loader in trace mode; it does not run the files.
func sharedLibraries(ctx context.Context, files []string) ([]string, error) {
	libs := map[string]bool{}
	for _, f := range files {
		found, err := librariesOf(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, l := range found {
			libs[l] = true
		}
	}
	out := make([]string, 0, len(libs))
	for l := range libs {
		out = append(out, l)
	}
	sort.Strings(out)
	return out, nil
}

// missingLibraryError is a library that an ELF file needs and the host does not have.
type missingLibraryError struct{ name string }

func (e missingLibraryError) Error() string { return "library " + e.name + " not found" }

// librariesOf is sharedLibraries for one file.
func librariesOf(ctx context.Context, f string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", f).CombinedOutput()
	text := string(out)
	if err != nil {
		// ldd exits 1 for static binaries; that is an answer, not a failure.
		if strings.Contains(text, "not a dynamic executable") || strings.Contains(text, "statically linked") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", f, err, bytes.TrimSpace(out))
	}
	found, err := parseLdd(text)
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", f, err)
	}
	return found, nil
}

// parseLdd reads ldd output lines such as
//
//	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f...)
//	/lib64/ld-linux-x86-64.so.2 (0x00007f...)
//	linux-vdso.so.1 (0x00007ffd...)
func parseLdd(out string) ([]string, error) {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, "statically linked") {
			continue
		}
		if name, where, ok := strings.Cut(line, "=>"); ok {
			where = strings.TrimSpace(where)
			if strings.HasPrefix(where, "not found") {
				return nil, missingLibraryError{strings.TrimSpace(name)}
			}
			if p := strings.Fields(where); len(p) > 0 && strings.HasPrefix(p[0], "/") {
				libs = append(libs, p[0])
			}
			continue
		}
		if p := strings.Fields(line); len(p) > 0 && strings.HasPrefix(p[0], "/") {
			libs = append(libs, p[0])
		}
	}
	for _, l := range libs {
		// A library from an optimised glibc-hwcaps directory would not load on
		// the guest's plainer emulated CPU.
		if strings.Contains(l, "/glibc-hwcaps/") {
			return nil, fmt.Errorf("library %s comes from a glibc-hwcaps directory the guest CPU may not support", l)
		}
	}
	return libs, nil
}
