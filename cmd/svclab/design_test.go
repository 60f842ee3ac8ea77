package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const designPath = repoRoot + "/docs/design.md"

// TestDesignLayout: the layout table of docs/design.md names every package of
// the main module (what `go list ./...` lists) and nothing that is not there,
// so that a package added, moved or removed changes the page with it.
func TestDesignLayout(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 30 {
		t.Fatalf("only %d packages found under %s: is the walk wrong?", len(pkgs), repoRoot)
	}
	rows := layoutRows(t)
	if len(rows) < 30 {
		t.Fatalf("only %d paths found in the layout table of %s: is the pattern wrong?", len(rows), designPath)
	}
	for _, p := range pkgs {
		if _, ok := rows[p]; !ok {
			t.Errorf("docs/design.md: the layout table does not name package %s", p)
		}
	}
	for p, line := range rows {
		if slices.Contains(pkgs, p) {
			continue
		}
		// A directory that is no package of the main module (components/,
		// scripts/, docs/) may be named, as long as it is there.
		if st, err := os.Stat(filepath.Join(repoRoot, p)); err != nil || !st.IsDir() {
			t.Errorf("docs/design.md:%d: the layout table names %s, which is no package or directory of the repository", line, p)
		}
	}
}

// modulePackages are the import paths, relative to the module's root, of the
// directories `go list ./...` lists: those holding a Go file (tests alone
// too, as specs/ does), outside testdata, hidden directories and other
// modules.
func modulePackages(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != repoRoot {
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
				rel, err := filepath.Rel(repoRoot, p)
				if err != nil {
					return err
				}
				if rel == "." {
					rel = ""
				}
				pkgs = append(pkgs, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// layoutRows are the paths named in the first column of the table under
// docs/design.md's "## Layout", with their lines; a trailing slash is dropped.
func layoutRows(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(designPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := regexp.MustCompile("`([^`]+)`")
	rows := map[string]int{}
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Layout"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range code.FindAllStringSubmatch(first, -1) {
			rows[strings.TrimSuffix(m[1], "/")] = n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}
