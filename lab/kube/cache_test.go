package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sharedCaches points the default cache and root's cache at temporary
// directories, as for an ordinary user whose root has a cache: own does not
// exist yet, system does.
func sharedCaches(t *testing.T) (own, system string) {
	t.Helper()
	own, system = filepath.Join(t.TempDir(), "user", "kube"), t.TempDir()
	oldDefault, oldSystem := DefaultCacheDir, systemCacheDir
	DefaultCacheDir, systemCacheDir = own, system
	t.Cleanup(func() { DefaultCacheDir, systemCacheDir = oldDefault, oldSystem })
	return own, system
}

// fakeBinary writes an executable at path, last used long ago.
func fakeBinary(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// TestBinaryReadsRootsCache: a run with the default cache of an ordinary user
// uses the binary root built for the same sources, writing nothing there (not
// even its use time) and making nothing of its own; its own build of that key,
// once there, comes first; a cache chosen explicitly is the only one looked in.
func TestBinaryReadsRootsCache(t *testing.T) {
	fakeSource(t, "kubernetes fake")
	src, err := findSource()
	if err != nil {
		t.Fatal(err)
	}
	key, err := sourceKey(src)
	if err != nil {
		t.Fatal(err)
	}
	own, system := sharedCaches(t)
	roots := filepath.Join(system, cachedName(key))
	fakeBinary(t, roots)
	ctx := context.Background()

	got, err := Binary(ctx, Options{NoBuild: true})
	if err != nil || got != roots {
		t.Fatalf("root's build of these sources: Binary = %s, %v; want %s", got, err, roots)
	}
	if fi, _ := os.Stat(roots); time.Since(fi.ModTime()) < time.Hour {
		t.Errorf("root's binary was touched")
	}
	if _, err := os.Stat(own); err == nil {
		t.Errorf("the user's cache %s was made for a lookup", own)
	}
	assertUnwritten(t, system, cachedName(key))

	if _, err := Binary(ctx, Options{NoBuild: true, CacheDir: t.TempDir()}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("explicit cache without the binary: %v, want ErrNotBuilt", err)
	}

	os.MkdirAll(own, 0o755)
	mine := filepath.Join(own, cachedName(key))
	fakeBinary(t, mine)
	if got, err := Binary(ctx, Options{NoBuild: true}); err != nil || got != mine {
		t.Errorf("own build and root's: Binary = %s, %v; want the own %s", got, err, mine)
	}
}

// TestBinaryWithoutSourceReadsRootsCache: an installed svclab without its
// source tree takes root's newest binary of this version when its own cache
// has none.
func TestBinaryWithoutSourceReadsRootsCache(t *testing.T) {
	t.Setenv(BinaryEnv, "")
	t.Setenv(SourceEnv, t.TempDir())
	_, system := sharedCaches(t)
	roots := filepath.Join(system, cachedName("0123456789abcdef"))
	fakeBinary(t, roots)
	if got, err := Binary(context.Background(), Options{}); err != nil || got != roots {
		t.Errorf("no source, root's binary: %s, %v; want %s", got, err, roots)
	}
	assertUnwritten(t, system, cachedName("0123456789abcdef"))
}

// TestBinaryBuildsOnlyIntoOwnCache: what root's cache lacks is built into the
// user's own, with no lock or leftover in root's; a cache that cannot be made
// is named in the error.
func TestBinaryBuildsOnlyIntoOwnCache(t *testing.T) {
	fakeSource(t, "kubernetes fake-own")
	own, system := sharedCaches(t)
	fakeBinary(t, filepath.Join(system, cachedName("0123456789abcdef"))) // other sources
	got, err := Binary(context.Background(), Options{})
	if err != nil || filepath.Dir(got) != own {
		t.Fatalf("Binary = %s, %v; want a build in %s", got, err, own)
	}
	assertUnwritten(t, system, cachedName("0123456789abcdef"))

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	DefaultCacheDir = filepath.Join(file, "kube")
	fakeSource(t, "kubernetes fake-unwritable")
	if _, err := Binary(context.Background(), Options{}); err == nil || !strings.Contains(err.Error(), DefaultCacheDir) {
		t.Errorf("unwritable cache: %v, want an error naming %s", err, DefaultCacheDir)
	}
}

// assertUnwritten fails unless dir holds exactly the files named (root's
// cache: no lock, no build leftovers).
func assertUnwritten(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, names) {
		t.Errorf("root's cache %s holds %v, want only %v", dir, got, names)
	}
}

// TestGoEnv: the go command gets caches under svclab's only when it has no
// place of its own for them (a user without a home, as nobody).
func TestGoEnv(t *testing.T) {
	home := t.TempDir()
	const cache = "/c/kube"
	for _, c := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no home", map[string]string{"HOME": "/nonexistent"}, []string{"GOCACHE=/c/kube/go/build", "GOMODCACHE=/c/kube/go/mod"}},
		{"HOME unset", nil, []string{"GOCACHE=/c/kube/go/build", "GOMODCACHE=/c/kube/go/mod"}},
		{"a home", map[string]string{"HOME": home}, nil},
		{"go's own settings", map[string]string{"GOCACHE": "/g", "GOMODCACHE": "/m"}, nil},
		{"GOPATH gives the module cache", map[string]string{"GOPATH": "/gp"}, []string{"GOCACHE=/c/kube/go/build"}},
		{"XDG_CACHE_HOME gives the build cache", map[string]string{"XDG_CACHE_HOME": "/x"}, []string{"GOMODCACHE=/c/kube/go/mod"}},
		{"relative XDG_CACHE_HOME gives none", map[string]string{"XDG_CACHE_HOME": "x", "GOPATH": "/gp"}, []string{"GOCACHE=/c/kube/go/build"}},
	} {
		got := goEnv(cache, func(k string) string { return c.env[k] })
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: goEnv = %q, want %q", c.name, got, c.want)
		}
	}
}
