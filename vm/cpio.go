package vm

import (
	"fmt"
	"io"
	"time"
)

// cpioWriter writes the "newc" cpio format, the only one the kernel's initramfs
// unpacker reads. It is written here rather than taken from a Go cpio library
// because the guest needs a /dev/console device node before devtmpfs is mounted,
// and the libraries leave a node's rdev fields at zero.
type cpioWriter struct {
	w   io.Writer
	n   int64 // bytes written so far, for 4-byte alignment
	ino uint32
}

const (
	cpioModeDir     = 0o040000
	cpioModeFile    = 0o100000
	cpioModeSymlink = 0o120000
	cpioModeChar    = 0o020000
)

func newCPIOWriter(w io.Writer) *cpioWriter { return &cpioWriter{w: w} }

func (c *cpioWriter) write(p []byte) error {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return err
}

func (c *cpioWriter) pad() error {
	if r := c.n % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}

type cpioHeader struct {
	name      string
	mode      uint32 // type and permission bits
	size      int64
	mtime     time.Time
	rdevMajor uint32
	rdevMinor uint32
	links     uint32
}

func (c *cpioWriter) header(h cpioHeader) error {
	if h.size > 0xffffffff {
		return fmt.Errorf("cpio: %s: %d bytes is more than newc can hold", h.name, h.size)
	}
	c.ino++
	links := h.links
	if links == 0 {
		links = 1
	}
	var mtime int64
	if !h.mtime.IsZero() {
		mtime = h.mtime.Unix()
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, h.mode, 0, 0, links, uint32(mtime), uint32(h.size),
		0, 0, h.rdevMajor, h.rdevMinor, len(h.name)+1, 0)
	if err := c.write([]byte(hdr)); err != nil {
		return err
	}
	if err := c.write(append([]byte(h.name), 0)); err != nil {
		return err
	}
	return c.pad()
}

// Dir adds a directory; name has no leading slash.
func (c *cpioWriter) Dir(name string, perm uint32) error {
	return c.header(cpioHeader{name: name, mode: cpioModeDir | perm&0o7777, links: 2})
}

// File adds a regular file of size bytes read from r.
func (c *cpioWriter) File(name string, perm uint32, size int64, mtime time.Time, r io.Reader) error {
	if err := c.header(cpioHeader{name: name, mode: cpioModeFile | perm&0o7777, size: size, mtime: mtime}); err != nil {
		return err
	}
	n, err := io.CopyN(writerFunc(c.write), r, size)
	if err != nil {
		return fmt.Errorf("cpio: %s: copied %d of %d bytes: %w", name, n, size, err)
	}
	return c.pad()
}

// Symlink adds a symbolic link; newc stores the target as the file's data.
func (c *cpioWriter) Symlink(name, target string) error {
	if err := c.header(cpioHeader{name: name, mode: cpioModeSymlink | 0o777, size: int64(len(target))}); err != nil {
		return err
	}
	if err := c.write([]byte(target)); err != nil {
		return err
	}
	return c.pad()
}

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) error {
	return c.header(cpioHeader{name: name, mode: cpioModeChar | perm&0o7777, rdevMajor: major, rdevMinor: minor})
}

// Close writes the trailer and pads the archive to 512 bytes, so that another
// archive can follow it: the kernel skips zero padding between archives.
func (c *cpioWriter) Close() error {
	if err := c.header(cpioHeader{name: "TRAILER!!!"}); err != nil {
		return err
	}
	if r := c.n % 512; r != 0 {
		return c.write(make([]byte, 512-r))
	}
	return nil
}

type writerFunc func([]byte) error

func (f writerFunc) Write(p []byte) (int, error) {
	if err := f(p); err != nil {
		return 0, err
	}
	return len(p), nil
}
