package proxy

import (
	"context"
	"time"
)

// What a proxier may offer benchmarks besides its sync statistics
// (StatsReporter). Each is optional: a benchmark measures what every proxier
// offers and leaves out what one does not.

// BareApplier is a proxier that can install a state with its mode's own
// program alone, as a floor under its syncs: the same rules, without svclab
// computing them and without what kube-proxy does besides writing them.
type BareApplier interface {
	// BareApply installs s the way a full sync writes it, with the
	// configuration the proxier's last sync used, in one run of the mode's
	// program (iptables-restore), and returns that run's time. The node should
	// hold none of the mode's rules (Mode.Cleanup), as for a sync from empty.
	BareApply(ctx context.Context, s *State) (time.Duration, error)
}

// SyncEstimator is a proxier that can tell ahead about how long a sync would
// take, for a method whose syncs cannot be stopped part-way (Mode.PerRule):
// a benchmark asks before a sync rather than stop one.
type SyncEstimator interface {
	// EstimateSync is about how long Sync(s) would take from what the node and
	// the proxier hold now, and how that was worked out, in a phrase.
	EstimateSync(ctx context.Context, s *State) (time.Duration, string, error)
}

// KernelCounter is a proxier that can read back from the kernel what the node
// holds, named as the counts of its SyncStats ("rules", "virtual_servers"), so
// that a benchmark can check the kernel holds at least what the proxier says
// it installed.
type KernelCounter interface {
	KernelCounts(ctx context.Context) ([]Count, error)
}
