// Package fanout runs one function over many items at once, bounded: the lab
// builds namespaces, programs nodes and starts components this way, and a
// leaf package lets the network builder and the lab share it.
package fanout

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// Each runs fn for every item, at most parallel at once, stopping at the first
// error or when ctx ends.
func Each[T any](ctx context.Context, parallel int, items []T, fn func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, it := range items {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fn(gctx, it)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
