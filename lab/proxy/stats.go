package proxy

import "time"

// SyncStats is how a proxier accounts for one sync: where its time went and how
// much it wrote, each named in lower case ("write", "rules"), in the proxier's
// own order.
type SyncStats struct {
	Total  time.Duration
	Parts  []Part
	Counts []Count
}

// Part is one piece of a sync's time.
type Part struct {
	Name string
	D    time.Duration
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
