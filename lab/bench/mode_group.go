package bench

import (
	"context"
	"errors"
	"time"

	"github.com/svclab/svclab/lab/proxy"
)

// modeGroup measures a mode other than iptables (IPVS): the cold sync on a fresh
// node, the data path and the updates.
func (r *runner) modeGroup(ctx context.Context, g group) error {
	m, err := proxy.Lookup(g.mode)
	if err != nil {
		return err
	}
	s := subject{g.mode, methodOf(g.mode), ""}
	n, e := g.n, g.e
	return r.withNode(ctx, func(nd *node) error {
		if err := r.baseline(ctx, nd, g); err != nil {
			return err
		}
		st := newState(n, e, r.c.Reps, nd.bk)
		settle()
		before, err := kernelMemory()
		if err != nil {
			return err
		}
		p, err := m.New(nd.target)
		if err != nil {
			return err
		}
		err = func() error {
			d, err := timedSync(ctx, p, st.current())
			if err != nil {
				return err
			}
			settle()
			after, err := kernelMemory()
			if err != nil {
				return err
			}
			r.addDuration(s, n, e, "cold_sync", 0, d)
			r.addParts(s, n, e, "cold", 0, p)
			r.cold[g.curve()] = append(r.cold[g.curve()], coldPoint{n: n, growing: d})
			r.add(s, n, e, "kernel_memory", 0, float64(after-before), unitBytes)
			r.logf("  cold sync: %s", d.Round(time.Millisecond))
			vs, rs, ok, err := ipvsCounts(nd.nodeNS)
			if err != nil {
				return err
			}
			if ok {
				r.add(s, n, e, "virtual_servers", 0, float64(vs), unitCount)
				r.add(s, n, e, "real_servers", 0, float64(rs), unitCount)
			}
			if err := r.dataPath(ctx, nd, st, s); err != nil {
				return err
			}
			return r.updates(ctx, nd, st, p, s)
		}()
		return errors.Join(err, p.Close())
	})
}
