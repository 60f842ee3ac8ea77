package vm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// tree is a guest filesystem being assembled before it is written as a cpio
// archive. Keys are guest paths without the leading slash.
type tree map[string]*node

type nodeKind int

const (
	kindDir nodeKind = iota
	kindFile
	kindSymlink
	kindCharDev
)

type node struct {
	kind   nodeKind
	perm   uint32
	src    string // host file whose content the guest file gets
	data   []byte // content when src is empty
	target string // symlink target
	major  uint32
	minor  uint32
	mtime  time.Time
}

// guestKey turns a guest path into a tree key. Debian merged /bin, /sbin and /lib
// into /usr; the guest does the same, and every file is stored under its /usr
// name so that no archive entry has to pass through one of those symlinks.
func guestKey(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	for _, top := range []string{"bin", "sbin", "lib", "lib64"} {
		if p == top || strings.HasPrefix(p, top+"/") {
			return "usr/" + p
		}
	}
	return p
}

func (t tree) mkdirAll(key string) {
	for dir := path.Dir(key); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if _, ok := t[dir]; ok {
			continue
		}
		t[dir] = &node{kind: kindDir, perm: 0o755}
	}
}

func (t tree) put(p string, n *node) {
	key := guestKey(p)
	t.mkdirAll(key)
	t[key] = n
}

// dir adds a directory with the given permissions.
func (t tree) dir(p string, perm uint32) { t.put(p, &node{kind: kindDir, perm: perm}) }

// data adds a file with literal content.
func (t tree) data(p string, perm uint32, content []byte) {
	t.put(p, &node{kind: kindFile, perm: perm, data: content})
}

// symlink adds a symbolic link. Top-level merged-/usr links are added with
// rawSymlink instead, since guestKey would move them under /usr.
func (t tree) symlink(p, target string) { t.put(p, &node{kind: kindSymlink, target: target}) }

func (t tree) rawSymlink(key, target string) { t[key] = &node{kind: kindSymlink, target: target} }

func (t tree) charDev(p string, perm, major, minor uint32) {
	t.put(p, &node{kind: kindCharDev, perm: perm, major: major, minor: minor})
}

// hostFile adds the content of host file src (symlinks followed) at guest path p,
// keeping its permission bits.
func (t tree) hostFile(p, src string, keepMtime bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("guest file %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("guest file %s: host %s is not a regular file", p, src)
	}
	n := &node{kind: kindFile, perm: uint32(fi.Mode().Perm()), src: src}
	if keepMtime {
		n.mtime = fi.ModTime()
	}
	t.put(p, n)
	return nil
}

// hostTree copies host directory src to guest directory p, keeping symlinks as
// symlinks and skipping anything that is neither file, directory nor symlink.
func (t tree) hostTree(p, src string, keepMtime bool) error {
	return filepath.WalkDir(src, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, hp)
		if err != nil {
			return err
		}
		gp := path.Join(p, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			t.dir(gp, uint32(fi.Mode().Perm()))
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(hp)
			if err != nil {
				return err
			}
			t.symlink(gp, target)
		case d.Type().IsRegular():
			return t.hostFile(gp, hp, keepMtime)
		}
		return nil
	})
}

// has reports whether the guest path exists in the tree (as anything).
func (t tree) has(p string) bool { _, ok := t[guestKey(p)]; return ok }

// writeTo writes the tree as one cpio archive, parents before children.
func (t tree) writeTo(w io.Writer) error {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	// Sorting by path components puts every directory before its contents.
	sort.Slice(keys, func(i, j int) bool { return lessPath(keys[i], keys[j]) })
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := newCPIOWriter(bw)
	for _, k := range keys {
		n := t[k]
		var err error
		switch n.kind {
		case kindDir:
			err = cw.Dir(k, n.perm)
		case kindSymlink:
			err = cw.Symlink(k, n.target)
		case kindCharDev:
			err = cw.CharDev(k, n.perm, n.major, n.minor)
		case kindFile:
			err = writeFileNode(cw, k, n)
		}
		if err != nil {
			return fmt.Errorf("guest path /%s: %w", k, err)
		}
	}
	if err := cw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func writeFileNode(cw *cpioWriter, key string, n *node) error {
	if n.src == "" {
		return cw.File(key, n.perm, int64(len(n.data)), n.mtime, bytes.NewReader(n.data))
	}
	f, err := os.Open(n.src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return cw.File(key, n.perm, fi.Size(), n.mtime, f)
}

// lessPath orders paths component by component, so "a/b" sorts right after "a"
// and before "a-b".
func lessPath(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] != bs[i] {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}
