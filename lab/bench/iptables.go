package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/iptables"
)

// Tables kube-proxy writes to (mangle holds only its canary chain).
var kubeTables = []string{"filter", "nat", "mangle"}

// xtables runs one backend's programs inside the node's namespace, with the lock
// file the lab's proxiers use (see the iptables package's runner), so the bench's
// own calls and the proxier's never race and other labs are not held up.
type xtables struct {
	backend string
	ns      string
	env     []string
}

func newXtables(backend, ns, runDir string) xtables {
	return xtables{backend: backend, ns: ns, env: append(os.Environ(), "XTABLES_LOCKFILE="+filepath.Join(runDir, "xtables.lock"))}
}

func (x xtables) program(suffix string) string { return "iptables-" + x.backend + suffix }

// run runs program in the node's namespace; cancelling ctx kills it.
func (x xtables) run(ctx context.Context, stdin []byte, program string, args ...string) ([]byte, error) {
	var out []byte
	err := namespaces.Do(x.ns, func() error {
		cmd := exec.CommandContext(ctx, program, args...)
		cmd.Env = x.env
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var err error
		out, err = cmd.Output()
		if err != nil {
			return fmt.Errorf("%s %s: %w: %s", program, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
		}
		return nil
	})
	return out, err
}

// wipe flushes every chain of kube-proxy's tables and deletes the non-built-in
// ones, leaving the node as a fresh one: a cold sync starts from nothing. It is
// also how the bench clears the node before its namespace goes, so the kernel
// does not free a large ruleset in the background while the next lab is
// measured.
// It runs whatever became of the caller's context: it is cleanup too.
func (x xtables) wipe() error {
	for _, t := range kubeTables {
		for _, op := range []string{"-F", "-X"} {
			if _, err := x.run(context.Background(), nil, x.program(""), "-w", "5", "-t", t, op); err != nil {
				return err
			}
		}
	}
	return nil
}

// restore is bare iptables-restore of input, with the flags svclab's proxier
// and kube-proxy use, timed from outside as the proxier's own write is.
func (x xtables) restore(ctx context.Context, input []byte) (time.Duration, error) {
	start := time.Now()
	_, err := x.run(ctx, input, x.program("-restore"), "-w", "5", "--noflush", "--counters")
	return time.Since(start), err
}

// kernelRules counts the rules (-A lines) iptables-save prints for kube-proxy's
// tables: the kernel's own account of what was installed.
func (x xtables) kernelRules(ctx context.Context) (int, error) {
	n := 0
	for _, t := range kubeTables {
		out, err := x.run(ctx, nil, x.program("-save"), "-t", t)
		if err != nil {
			return 0, err
		}
		for _, l := range bytes.Split(out, []byte("\n")) {
			if bytes.HasPrefix(l, []byte("-A ")) {
				n++
			}
		}
	}
	return n, nil
}

// syncStatser is what the iptables proxier tells about its last sync.
type syncStatser interface {
	LastSync() iptables.SyncStats
}

// callCost is the time of one iptables call that reads a chain (the least of
// three): `iptables -C CHAIN -j RETURN`, which iptables answers "no" (status
// 1) after loading the chain (nft) or the whole table (legacy). On an empty
// table it is what any call costs at least, mostly starting the program; on a
// full one, what a call costs once the table is large.
func (x xtables) callCost(ctx context.Context, table, chain string) (time.Duration, error) {
	best := time.Duration(0)
	for i := 0; i < 3; i++ {
		start := time.Now()
		_, err := x.run(ctx, nil, x.program(""), "-w", "5", "-t", table, "-C", chain, "-j", "RETURN")
		d := time.Since(start)
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
			return 0, err
		}
		if best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}
