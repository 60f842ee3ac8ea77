// Package outdir is how a command writes a directory of results without ever
// removing or overwriting a file it did not write. A directory it writes holds
// a manifest listing every file it wrote there; a later run may remove and
// rewrite exactly those. A directory that is neither new, empty nor one with a
// manifest is refused, and so is a file of someone else's at a place the
// command writes.
package outdir

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Dir is a claimed output directory.
type Dir struct {
	path, manifest string
	// foreign are the files present when the directory was claimed that its
	// manifest does not list: someone else's, never touched.
	foreign map[string]bool
}

// Claim makes dir the output of a run. dir is created if missing; an existing
// dir must be empty or hold the manifest file (named manifest) of an earlier
// run, whose listed files are removed so that nothing old is shown as new.
// owns tells which paths (relative, slash-separated) the run may write: a file
// the manifest does not list at such a path is refused, naming it.
func Claim(dir, manifest string, owns func(rel string) bool) (*Dir, error) {
	d := &Dir{path: filepath.Clean(dir), manifest: manifest, foreign: map[string]bool{}}
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return nil, err
	}
	listed, hasManifest, err := d.readManifest()
	if err != nil {
		return nil, err
	}
	present, err := d.files()
	if err != nil {
		return nil, err
	}
	if !hasManifest && len(present) > 0 {
		return nil, fmt.Errorf("%s is not empty and no earlier run wrote it (it has no %s): svclab never writes into a directory of yours; give a new or empty directory", d.path, manifest)
	}
	var clash []string
	for _, rel := range present {
		if listed[rel] {
			continue
		}
		d.foreign[rel] = true
		if owns(rel) {
			clash = append(clash, filepath.Join(d.path, rel))
		}
	}
	if len(clash) > 0 {
		return nil, fmt.Errorf("%s: not written by an earlier run (%s does not list it), and this run writes there: move it away or give another directory", strings.Join(clash, ", "), manifest)
	}
	if err := d.removeListed(listed); err != nil {
		return nil, err
	}
	// Until the run ends, the manifest lists nothing: files the run leaves
	// half-written are refused by the next run rather than taken for its own.
	return d, d.writeManifest(nil)
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// Finish lists in the manifest every file now in the directory that was not
// someone else's when it was claimed: what this run wrote.
func (d *Dir) Finish() error {
	present, err := d.files()
	if err != nil {
		return err
	}
	present = slices.DeleteFunc(present, func(rel string) bool { return d.foreign[rel] })
	return d.writeManifest(present)
}

// files lists every regular file and symlink under the directory but the
// manifest, relative and slash-separated.
func (d *Dir) files() ([]string, error) {
	var out []string
	err := filepath.WalkDir(d.path, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(d.path, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel != d.manifest {
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

func (d *Dir) readManifest() (map[string]bool, bool, error) {
	p := filepath.Join(d.path, d.manifest)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		rel := strings.TrimSpace(sc.Text())
		if rel == "" || strings.HasPrefix(rel, "#") {
			continue
		}
		// A manifest names files inside its directory, never elsewhere.
		if !filepath.IsLocal(rel) || filepath.ToSlash(filepath.Clean(rel)) != rel {
			return nil, false, fmt.Errorf("%s:%d: %q is not a path inside %s", p, line, rel, d.path)
		}
		listed[rel] = true
	}
	return listed, true, sc.Err()
}

func (d *Dir) writeManifest(files []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Files svclab wrote in this directory; a later run removes and rewrites only these.\n")
	for _, f := range files {
		b.WriteString(f + "\n")
	}
	return os.WriteFile(filepath.Join(d.path, d.manifest), []byte(b.String()), 0o644)
}

// removeListed removes the files an earlier run listed, then the directories
// that this left empty (a directory holding anything else stays). Removal goes
// through an os.Root: a symlink planted in the directory cannot turn a listed
// name into a file elsewhere.
func (d *Dir) removeListed(listed map[string]bool) error {
	root, err := os.OpenRoot(d.path)
	if err != nil {
		return err
	}
	defer root.Close()
	for rel := range listed {
		if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", filepath.Join(d.path, rel), err)
		}
		for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
			if root.Remove(dir) != nil {
				break
			}
		}
	}
	return nil
}
