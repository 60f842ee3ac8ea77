package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
)

// sharedLibraries returns every shared library (and the dynamic loader) the given
// ELF files need, as host paths, by asking ldd. Statically linked files need
// none. ldd runs the dynamic loader in trace mode; it does not run the files.
// A plugin (dlopened at run time) that needs a library the host lacks is no
// error: it is returned in unloadable, with the reason, and its needs are not.
func sharedLibraries(ctx context.Context, files, plugins []string) (libs []string, unloadable map[string]error, err error) {
	set := map[string]bool{}
	unloadable = map[string]error{}
	for i, f := range append(slices.Clone(files), plugins...) {
		found, err := librariesOf(ctx, f)
		var missing missingLibraryError
		if i >= len(files) && errors.As(err, &missing) {
			unloadable[f] = err
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, l := range found {
			set[l] = true
		}
	}
	libs = make([]string, 0, len(set))
	for l := range set {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs, unloadable, nil
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
