package kube

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestVersionMatchesComponents keeps Version, which names cached binaries and sets
// their version strings, equal to the release components/go.mod pins.
func TestVersionMatchesComponents(t *testing.T) {
	b, err := os.ReadFile("../../components/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("components/go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range f.Require {
		if r.Mod.Path == "k8s.io/kubernetes" {
			found = true
			if r.Mod.Version != Version {
				t.Errorf("components/go.mod requires k8s.io/kubernetes %s, lab/kube.Version is %s", r.Mod.Version, Version)
			}
		}
	}
	if !found {
		t.Errorf("components/go.mod does not require k8s.io/kubernetes")
	}
	// Every staging module is replaced by its release of the same minor version.
	staging := strings.Replace(Version, "v1.", "v0.", 1)
	for _, r := range f.Replace {
		if strings.HasPrefix(r.Old.Path, "k8s.io/") && r.New.Version != staging {
			t.Errorf("components/go.mod replaces %s with %s %s, want %s", r.Old.Path, r.New.Path, r.New.Version, staging)
		}
	}
	if got := Ldflags(); !strings.Contains(got, "gitVersion="+Version) || !strings.Contains(got, "gitMinor=37") {
		t.Errorf("Ldflags() = %q", got)
	}
}

func TestSourceKey(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	key := func() string {
		t.Helper()
		k, err := sourceKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("go.mod", "module x\n")
	write("go.sum", "")
	write("cmd/x/main.go", "package main\n")
	k0 := key()
	write("README.md", "not read by the build")
	write("cmd/x/testdata/f.go", "package ignored")
	if key() != k0 {
		t.Errorf("files the build does not read changed the key")
	}
	write("cmd/x/main.go", "package main\n\nfunc main() {}\n")
	k1 := key()
	if k1 == k0 {
		t.Errorf("a changed .go file kept the key")
	}
	write("go.sum", "x v1 h1:abc\n")
	if key() == k1 {
		t.Errorf("a changed go.sum kept the key")
	}
	// Moving content between files is a change too.
	write("cmd/x/a.go", "package main\n")
	k2 := key()
	write("cmd/x/a.go", "")
	write("cmd/x/b.go", "package main\n")
	if key() == k2 {
		t.Errorf("moving content to another file kept the key")
	}
}

func TestFindSource(t *testing.T) {
	t.Setenv(SourceEnv, "")
	dir, err := findSource()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Abs("../../components")
	if dir != want {
		t.Errorf("findSource() = %s, want %s (walking up from the test's directory)", dir, want)
	}
	t.Setenv(SourceEnv, t.TempDir())
	if _, err := findSource(); err == nil || !strings.Contains(err.Error(), "components/go.mod") {
		t.Errorf("findSource with $%s at an empty directory: %v, want an error naming components/go.mod", SourceEnv, err)
	}
}

// fakeSource makes a source tree whose components module is a tiny program
// printing line, and points $SVCLAB_SOURCE at it.
func fakeSource(t *testing.T, line string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"components/go.mod":                  "module example.com/fake\n\ngo 1.26\n",
		"components/cmd/svclab-kube/main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(" + strconv.Quote(line) + ") }\n",
	}
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(SourceEnv, root)
	t.Setenv(BinaryEnv, "")
	return root
}

// TestBinaryBuild builds a stand-in components module through Binary: the first
// call builds (saying so), later calls and concurrent ones get the same cached
// file without building again, a changed source builds anew, and a broken one
// fails with the compiler's message.
func TestBinaryBuild(t *testing.T) {
	fakeSource(t, "kubernetes fake-1")
	cache := t.TempDir()
	ctx := context.Background()
	var log bytes.Buffer
	first, err := Binary(ctx, Options{CacheDir: cache, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "kube: building the Kubernetes components ("+Version+"), first use: takes several minutes...") ||
		!strings.Contains(log.String(), "kube: built the Kubernetes components in ") {
		t.Errorf("build log:\n%s", log.String())
	}
	if filepath.Dir(first) != cache || !strings.HasPrefix(filepath.Base(first), "svclab-kube-"+Version+"-") {
		t.Errorf("binary at %s, want svclab-kube-%s-KEY in %s", first, Version, cache)
	}
	if out, err := exec.Command(first).Output(); err != nil || string(out) != "kubernetes fake-1\n" {
		t.Errorf("built binary printed %q (%v)", out, err)
	}
	log.Reset()
	again, err := Binary(ctx, Options{CacheDir: cache, Log: &log})
	if err != nil || again != first || log.Len() != 0 {
		t.Errorf("second call: %s, %v, log %q; want %s from the cache, silently", again, err, log.String(), first)
	}

	// A changed source is a new build; two callers at once build it once.
	fakeSource(t, "kubernetes fake-2")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var logs bytes.Buffer
	paths := make([]string, 2)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l bytes.Buffer
			p, err := Binary(ctx, Options{CacheDir: cache, Log: &l})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			logs.Write(l.Bytes())
			mu.Unlock()
			paths[i] = p
		}()
	}
	wg.Wait()
	if paths[0] != paths[1] || paths[0] == first {
		t.Errorf("concurrent calls got %v; want one new binary", paths)
	}
	if n := strings.Count(logs.String(), "kube: building"); n != 1 {
		t.Errorf("concurrent calls built %d times:\n%s", n, logs.String())
	}
	if out, _ := exec.Command(paths[0]).Output(); string(out) != "kubernetes fake-2\n" {
		t.Errorf("rebuilt binary printed %q", out)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(cache, ".build-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left in the cache: %v", leftovers)
	}

	// A given binary is used as it is once its version command answers.
	if got, err := Binary(ctx, Options{Path: first}); err != nil || got != first {
		t.Errorf("Binary(Path: %s) = %s, %v", first, got, err)
	}
	t.Chdir(cache)
	if got, err := Binary(ctx, Options{Path: "./" + filepath.Base(first)}); err != nil || got != first {
		t.Errorf("Binary(Path: ./%s) = %s, %v; want the absolute %s", filepath.Base(first), got, err, first)
	}
	if _, err := Binary(ctx, Options{Path: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "not a svclab-kube") {
		t.Errorf("Binary(Path: /bin/true) = %v, want it refused", err)
	}
	if _, err := Binary(ctx, Options{Path: filepath.Join(cache, "nothing")}); err == nil {
		t.Errorf("Binary with a missing path succeeded")
	}

	// A source that does not compile fails with the compiler's words.
	root := fakeSource(t, "x")
	os.WriteFile(filepath.Join(root, "components/cmd/svclab-kube/main.go"), []byte("package main\n\nfunc main() { undefinedThing() }\n"), 0o644)
	if _, err := Binary(ctx, Options{CacheDir: cache}); err == nil || !strings.Contains(err.Error(), "undefined: undefinedThing") {
		t.Errorf("broken source: %v, want the compiler's error", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(cache, ".build-*")); len(leftovers) > 0 {
		t.Errorf("a failed build left %v", leftovers)
	}
}

// TestBinaryWithoutSource: no source tree and nothing cached is an error saying
// what to do; with a cached binary of this version, that one is used.
func TestBinaryWithoutSource(t *testing.T) {
	t.Setenv(BinaryEnv, "")
	t.Setenv(SourceEnv, t.TempDir())
	cache := t.TempDir()
	_, err := Binary(context.Background(), Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "--kube-binary") || !strings.Contains(err.Error(), "not built yet") {
		t.Errorf("no source, no cache: %v", err)
	}
	cached := filepath.Join(cache, cachedName("0123456789abcdef"))
	if err := os.WriteFile(cached, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if got, err := Binary(context.Background(), Options{CacheDir: cache, Log: &log}); err != nil || got != cached {
		t.Errorf("no source, one cached: %s, %v; want %s", got, err, cached)
	}
	if !strings.Contains(log.String(), "no source tree") {
		t.Errorf("log %q does not say why the cached binary is used", log.String())
	}
}

// TestBinaryCheckWaitFor: a given binary takes --wait-for when its version
// command lists it, as svclab-kube's does; an older build's does not, and a
// lab then starts its components only once the API server is ready.
func TestBinaryCheckWaitFor(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, out string
		err       bool
		waitFor   bool
	}{
		{"current", "kubernetes v1.37.2\\netcd 3.7.2\\ncoredns 1.15.0\\ngo go1.26\\nsvclab-kube --wait-for\\n", false, true},
		{"older", "kubernetes v1.37.2\\netcd 3.7.2\\ncoredns 1.15.0\\ngo go1.26\\n", false, false},
		{"other-option", "kubernetes v1.37.2\\nsvclab-kube --something-else\\n", false, false},
		{"not-ours", "hello\\n", true, false},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\nprintf '"+c.out+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, checked, err := BinaryChecked(context.Background(), Options{Path: path})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := <-checked
		if (got.Err != nil) != c.err || got.WaitFor != c.waitFor {
			t.Errorf("%s: check = %+v, want error %v, WaitFor %v", c.name, got, c.err, c.waitFor)
		}
	}
	if got := WaitForArgs("", []string{"coredns", "-conf", "x"}); strings.Join(got, " ") != "coredns -conf x" {
		t.Errorf("WaitForArgs without a file = %q", got)
	}
	if got := WaitForArgs("/run/k", []string{"kube-proxy", "--config=c"}); strings.Join(got, " ") != "--wait-for /run/k kube-proxy --config=c" {
		t.Errorf("WaitForArgs = %q", got)
	}
	if _, err := StartProxy("bin", ProxyProcessConfig{Binary: "/usr/local/bin/kube-proxy", WaitFor: "/run/k"}); err == nil {
		t.Errorf("a kube-proxy of the user's was asked to wait, and no error said it cannot")
	}
}
