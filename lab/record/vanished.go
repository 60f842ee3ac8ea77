package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/svclab/svclab/lab/namespaces"
)

// Vanished is the error of a command whose lab was taken down under it: a
// verify, trace or exec that only saw "context canceled" or "signal: killed"
// from the iptables it ran says instead that the lab went away, and who took it
// when that can be told.
type Vanished struct {
	// ID is the lab's; During names the command it vanished under ("verify").
	ID, During string
	// Why is what is gone: "its record was removed", "its owner, pid 812,
	// exited", "its namespace svclab-web-node-1-k3f9 was deleted", "its owner
	// got SIGTERM".
	Why string
	// By names the svclab process that took it down ("`svclab down web-1a2b`,
	// pid 4711"); empty when none was seen.
	By string
}

func (v *Vanished) Error() string {
	if v.By != "" {
		return fmt.Sprintf("lab %s was taken down during %s (by %s: %s)", v.ID, v.During, v.By, v.Why)
	}
	return fmt.Sprintf("lab %s was taken down during %s (%s)", v.ID, v.During, v.Why)
}

// Gone says what of lab r, recorded in dir, is gone, or returns nil while the
// lab is whole: its record, its owner (unless the caller is the owner, which a
// SIGTERM tells instead) and every member's namespace. during names the
// caller's command. It reads only the record file and /run/netns, so callers
// may ask often.
func Gone(dir string, r *Lab, during string) *Vanished {
	if dir == "" {
		dir = DefaultDir
	}
	v := &Vanished{ID: r.ID, During: during}
	b, err := os.ReadFile(file(dir, r.ID))
	var now Lab
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.Why = "its record was removed"
	case err != nil:
		// Unreadable is not gone: the lab may be whole.
		return nil
	case json.Unmarshal(b, &now) == nil && now.RunID != r.RunID:
		v.Why = "its record now names another run, " + now.RunID
	case r.Owner.PID != os.Getpid() && !r.Owner.Alive():
		v.Why = fmt.Sprintf("its owner, pid %d, exited", r.Owner.PID)
	}
	if v.Why == "" {
		for _, m := range r.Members {
			if !namespaces.Mounted(m.NetNS) {
				v.Why = fmt.Sprintf("its namespace %s (member %s) was deleted", m.NetNS, m.Name)
				break
			}
		}
	}
	if v.Why == "" {
		return nil
	}
	v.By = Stopper(dir, r)
	return v
}

// Stopper names the svclab process that is taking lab r (recorded in dir)
// down, as "`svclab down web-1a2b`, pid 4711": a `down` naming the lab by ID
// or name, or a `clean` (with --all, the only one that stops a running lab),
// seeing the same record directory as the caller. "" when none runs. `down`
// waits for the owner to end and `clean --all` up to five seconds, so an owner
// that got SIGTERM from one finds it still running. Signals carry their
// sender's pid only to a handler Go's runtime does not expose, hence this
// look at /proc.
func Stopper(dir string, r *Lab) string {
	if dir == "" {
		dir = DefaultDir
	}
	var ours syscall.Stat_t
	if err := syscall.Stat(dir, &ours); err != nil {
		return ""
	}
	procs, _ := os.ReadDir("/proc")
	var clean string
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(argv) < 2 || !strings.Contains(filepath.Base(argv[0]), "svclab") {
			continue
		}
		// The same record directory, whatever the mount namespace: a down
		// or clean of another set of labs took nothing of this one.
		var theirs syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/proc", p.Name(), "root", dir), &theirs); err != nil ||
			theirs.Dev != ours.Dev || theirs.Ino != ours.Ino {
			continue
		}
		cmd := strings.Join(argv[1:], " ")
		switch {
		case argv[1] == "down" && len(argv) > 2 && (argv[2] == r.ID || argv[2] == r.Name):
			return fmt.Sprintf("`svclab %s`, pid %d", cmd, pid)
		case argv[1] == "clean" && clean == "":
			clean = fmt.Sprintf("`svclab %s`, pid %d", cmd, pid)
		}
	}
	return clean
}
