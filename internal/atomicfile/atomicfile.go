// Package atomicfile writes a file whole or not at all: readers, and whoever
// looks after an interrupted run, see the old content or the new, never a part.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces file with data through a temporary file in the same
// directory and a rename; on any failure the temporary file is removed and
// file is as it was.
func Write(file string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // gone by the rename when it succeeds
	_, err = f.Write(data)
	if err == nil {
		// A rename can reach the disk before the data it names does; sync
		// first, so that a crash leaves the old file or the whole new one.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), perm)
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), file)
}
