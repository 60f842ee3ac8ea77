package lab

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// controlPlaneSpace is the room a lab with a control plane takes under its run
// directory (/run/svclab, a tmpfs): etcd preallocates a 64 MiB write-ahead
// log segment, and its database, the PKI, the kubeconfigs and the components'
// logs come on top. Measured: 123 MiB under /run/svclab (du) with `svclab up
// --control-plane -f web` running, as issue 16 found; rounded up.
const controlPlaneSpace = 128 << 20

// checkRunSpace fails, with the figures and what to do, when dir's filesystem
// has less than need bytes free.
func checkRunSpace(dir string, need uint64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space in %s: %w", dir, err)
	}
	free := st.Bavail * uint64(st.Bsize)
	if free >= need {
		return nil
	}
	return fmt.Errorf("%s has %d MiB free, and a lab with a control plane needs about %d MiB there (etcd preallocates a 64 MiB write-ahead log): "+
		"free space on that filesystem (`df -h %s`; `svclab ls` and `svclab down` for labs you no longer need) or enlarge it (a tmpfs such as /run: `mount -o remount,size=1G /run`)",
		dir, free>>20, need>>20, dir)
}
