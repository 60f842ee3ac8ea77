package rootless

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// idRange is a user's subordinate range of /etc/subuid or /etc/subgid.
type idRange struct{ start, count int }

// idMaps is what Run maps in a new user namespace: the user's own IDs to 0,
// the subordinate ranges from 1 up.
type idMaps struct {
	uid, gid             int
	uids, gids           idRange
	newuidmap, newgidmap string
}

// subordinateIDs is the user's subordinate ranges and the setuid helpers that
// map them, or nil when the user has no range or the helpers are missing
// (Run then maps the user alone).
func subordinateIDs() (*idMaps, error) {
	newuidmap, err1 := exec.LookPath("newuidmap")
	newgidmap, err2 := exec.LookPath("newgidmap")
	if err1 != nil || err2 != nil {
		return nil, nil
	}
	m := &idMaps{uid: os.Getuid(), gid: os.Getgid(), newuidmap: newuidmap, newgidmap: newgidmap}
	name := ""
	if u, err := user.LookupId(strconv.Itoa(m.uid)); err == nil {
		name = u.Username
	}
	var ok bool
	var err error
	if m.uids, ok, err = lookupRange("/etc/subuid", name, m.uid); err != nil || !ok {
		return nil, err
	}
	// newgidmap checks /etc/subgid under the user's name (or uid), as
	// shadow's useradd writes it, not the group's.
	if m.gids, ok, err = lookupRange("/etc/subgid", name, m.uid); err != nil || !ok {
		return nil, err
	}
	return m, nil
}

// lookupRange finds the first range of file that belongs to name or id. A
// file that cannot be read (most often: missing) holds no range.
func lookupRange(file, name string, id int) (idRange, bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return idRange{}, false, nil
	}
	defer f.Close()
	r, ok, err := parseRanges(f, name, id)
	if err != nil {
		return idRange{}, false, fmt.Errorf("%s: %w", file, err)
	}
	return r, ok, nil
}

// parseRanges reads subuid(5) lines, "owner:start:count", where owner is a
// name or a numeric ID.
func parseRanges(r io.Reader, name string, id int) (idRange, bool, error) {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 3 || (f[0] != name || name == "") && f[0] != strconv.Itoa(id) {
			continue
		}
		start, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || start < 0 || count <= 0 {
			return idRange{}, false, fmt.Errorf("line %d: %q is not owner:start:count", n, line)
		}
		return idRange{start, count}, true, nil
	}
	return idRange{}, false, sc.Err()
}

// write maps the user namespace of process pid with newuidmap and newgidmap.
func (m *idMaps) write(pid int) error {
	for _, w := range []struct {
		helper string
		id     int
		sub    idRange
	}{{m.newuidmap, m.uid, m.uids}, {m.newgidmap, m.gid, m.gids}} {
		args := []string{strconv.Itoa(pid), "0", strconv.Itoa(w.id), "1", "1", strconv.Itoa(w.sub.start), strconv.Itoa(w.sub.count)}
		if out, err := exec.Command(w.helper, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("rootless: %s %s: %v: %s (the subordinate IDs in /etc/subuid and /etc/subgid)",
				w.helper, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// waitForMappings, in a new user namespace's first process, blocks until Run
// has written the namespace's ID mappings (when it uses the helpers), then
// executes svclab again: the process was executed before it had an ID in its
// namespace, so without capabilities there, and only an execve as the root
// it now is gives them (user_namespaces(7), "Effect of capabilities").
func waitForMappings() error {
	fd := os.Getenv(envMappingFD)
	if fd == "" {
		return nil
	}
	os.Unsetenv(envMappingFD)
	n, err := strconv.Atoi(fd)
	if err != nil {
		return fmt.Errorf("rootless: %s=%q", envMappingFD, fd)
	}
	f := os.NewFile(uintptr(n), "mappings")
	var b [1]byte
	_, err = f.Read(b[:])
	f.Close()
	if err != nil {
		return fmt.Errorf("rootless: waiting for the user namespace's ID mappings: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return fmt.Errorf("rootless: execute svclab again as root in its user namespace: %w", syscall.Exec(self, os.Args, os.Environ()))
}
