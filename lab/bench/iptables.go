package bench

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy/iptables"
	xt "github.com/svclab/svclab/lab/proxy/xtables"
)

// Tables kube-proxy writes to (mangle holds only its canary chain).
var kubeTables = []string{"filter", "nat", "mangle"}

// xtables runs one backend's programs inside the node's namespace through the
// runner the lab's proxiers use, with the same lock file, so the bench's own
// calls and the proxier's never race and other labs are not held up.
type xtables struct {
	ns string
	r  *xt.Runner
}

func newXtables(backend, ns, runDir string) (xtables, error) {
	b, err := xt.BackendFor(backend)
	if err != nil {
		return xtables{}, err
	}
	return xtables{ns: ns, r: xt.NewRunner(b, runDir)}, nil
}

// do runs f on a thread in the node's namespace; cancelling ctx kills the
// program f runs.
func (x xtables) do(ctx context.Context, f func(r *xt.Runner) error) error {
	return namespaces.Do(x.ns, func() error {
		x.r.Ctx = ctx
		return f(x.r)
	})
}

// wipe flushes every chain of kube-proxy's tables and deletes the non-built-in
// ones, leaving the node as a fresh one: a cold sync starts from nothing. It is
// also how the bench clears the node before its namespace goes, so the kernel
// does not free a large ruleset in the background while the next lab is
// measured.
// It runs whatever became of the caller's context: it is cleanup too.
func (x xtables) wipe() error {
	return x.do(context.Background(), func(r *xt.Runner) error {
		for _, t := range kubeTables {
			for _, op := range []string{"-F", "-X"} {
				if err := r.Do("-t", t, op); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// restore is bare iptables-restore of input, with the flags svclab's proxier
// and kube-proxy use, timed from outside as the proxier's own write is.
func (x xtables) restore(ctx context.Context, input []byte) (d time.Duration, err error) {
	err = x.do(ctx, func(r *xt.Runner) error {
		start := time.Now()
		err := r.Restore(input)
		d = time.Since(start)
		return err
	})
	return d, err
}

// kernelRules counts the rules (-A lines) iptables-save prints for kube-proxy's
// tables: the kernel's own account of what was installed.
func (x xtables) kernelRules(ctx context.Context) (n int, err error) {
	err = x.do(ctx, func(r *xt.Runner) error {
		for _, t := range kubeTables {
			out, err := r.Save(t)
			if err != nil {
				return err
			}
			for _, l := range bytes.Split(out, []byte("\n")) {
				if bytes.HasPrefix(l, []byte("-A ")) {
					n++
				}
			}
		}
		return nil
	})
	return n, err
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
func (x xtables) callCost(ctx context.Context, table, chain string) (best time.Duration, err error) {
	err = x.do(ctx, func(r *xt.Runner) error {
		for i := 0; i < 3; i++ {
			start := time.Now()
			if _, err := r.Test("-t", table, "-C", chain, "-j", "RETURN"); err != nil {
				return fmt.Errorf("timing one iptables call: %w", err)
			}
			if d := time.Since(start); best == 0 || d < best {
				best = d
			}
		}
		return nil
	})
	return best, err
}
