package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// componentsDir is where the components module lives in the svclab source tree.
const componentsDir = "components"

// findSource returns the components module's directory: under $SVCLAB_SOURCE if
// set, else under the first directory holding components/go.mod found walking up
// from the executable, then from the working directory (a test binary lives in a
// temporary directory; `go test` runs it in the package's directory).
func findSource() (string, error) {
	if dir := os.Getenv(SourceEnv); dir != "" {
		c := filepath.Join(dir, componentsDir)
		if !isFile(filepath.Join(c, "go.mod")) {
			return "", fmt.Errorf("$%s=%s holds no %s/go.mod", SourceEnv, dir, componentsDir)
		}
		return c, nil
	}
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			c := filepath.Join(dir, componentsDir)
			if isFile(filepath.Join(c, "go.mod")) {
				return c, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("no svclab source tree (a directory holding %s/go.mod) above %s: set $%s to the repository's directory", componentsDir, strings.Join(starts, " or "), SourceEnv)
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// sourceKey hashes what the build reads from the components module: go.mod,
// go.sum and every .go file, by path and content. Anything else (a README, build
// output) does not change the binary.
func sourceKey(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Go ignores these directories too.
			if p != dir && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "go.mod" || rel == "go.sum" || strings.HasSuffix(rel, ".go") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash components sources in %s: %w", dir, err)
	}
	sort.Strings(files)
	h := sha256.New()
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return "", fmt.Errorf("hash components sources: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
