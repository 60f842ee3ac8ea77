package vm

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// extractOut unpacks the tar stream of the guest's /out into dir. Writes go
// through an os.Root, so no entry (a "../x" name, a symlink planted earlier in the
// stream) can place a file outside dir.
func extractOut(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar stream from the guest: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if name == "." || name == "" {
			continue
		}
		if err := extractEntry(root, tr, hdr, name); err != nil {
			return fmt.Errorf("out/%s: %w", name, err)
		}
	}
}

func extractEntry(root *os.Root, tr *tar.Reader, hdr *tar.Header, name string) error {
	perm := fs.FileMode(hdr.Mode).Perm()
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return root.MkdirAll(name, perm|0o700)
	case tar.TypeReg:
		// Removing first replaces a symlink instead of writing through it.
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case tar.TypeSymlink:
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return root.Symlink(hdr.Linkname, name)
	case tar.TypeLink:
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return root.Link(path.Clean(strings.TrimPrefix(hdr.Linkname, "./")), name)
	default:
		// Devices, fifos and sockets mean nothing on the host.
		return nil
	}
}
