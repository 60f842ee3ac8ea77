package proxy

import "time"

// SyncStats is how a proxier accounts for one sync: where its time went and how
// much it wrote, each named in lower case ("write", "rules"), in the proxier's
// own order. A count whose name ends in "_bytes" is a size in bytes.
type SyncStats struct {
	Total  time.Duration
	Parts  []Part
	Counts []Count
}

// Part is one piece of a sync's time.
type Part struct {
	Name string
	D    time.Duration
	// Housekeeping tells that the part is what kube-proxy does on a sync
	// besides computing and writing the Services' rules: ensuring its own
	// chains and jumps, looking for stale chains, cleaning conntrack. On a sync
	// from an empty node it hardly depends on the number of Services, so
	// benchmarks extrapolate the other parts alone, and set them alone beside a
	// bare write of the same rules (BareApplier).
	Housekeeping bool
}

// Count is one quantity a sync reports.
type Count struct {
	Name string
	N    int
}

// Part returns the duration of the part called name, and whether there is one.
func (s SyncStats) Part(name string) (time.Duration, bool) {
	for _, p := range s.Parts {
		if p.Name == name {
			return p.D, true
		}
	}
	return 0, false
}

// Count returns the count called name, and whether there is one.
func (s SyncStats) Count(name string) (int, bool) {
	for _, c := range s.Counts {
		if c.Name == name {
			return c.N, true
		}
	}
	return 0, false
}

// Own is the time of the parts that are not housekeeping: computing the rules
// and writing them.
func (s SyncStats) Own() time.Duration {
	var d time.Duration
	for _, p := range s.Parts {
		if !p.Housekeeping {
			d += p.D
		}
	}
	return d
}
