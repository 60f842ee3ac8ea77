package report

import "github.com/svclab/svclab/lab/bench"

// renamed maps the metric names of results.csv files written before the bench
// named every sync's parts and counts alike (PHASE_part_NAME, PHASE_NAME,
// kernel_NAME; see bench.Row) to today's, so that those files, docs/bench's
// among them, are read, summarised and checked as today's are. Then the cold
// sync's parts of the iptables mode were cold_NAME, its counts went without
// the phase, and the IPVS mode's virtual and real servers, read from the
// kernel, without "kernel_".
var renamed = map[string]string{
	"cold_generate":   "cold_part_generate",
	"cold_setup":      "cold_part_setup",
	"cold_save":       "cold_part_save",
	"cold_write":      "cold_part_write",
	"rules":           "cold_rules",
	"chains":          "cold_chains",
	"restore_bytes":   "cold_restore_bytes",
	"virtual_servers": "kernel_virtual_servers",
	"real_servers":    "kernel_real_servers",
}

// ownParts are the parts whose sum was a cold sync's own work (cold_own) in
// those files: computing the rules and writing them.
var ownParts = []string{"cold_generate", "cold_write"}

// upgradeRows renames the metrics of an older file and adds the cold_own rows
// it lacked; rows of today's files pass unchanged.
func upgradeRows(rows []bench.Row) []bench.Row {
	type cell struct {
		s    bench.Subject
		n, e int
		rep  int
	}
	own := map[cell]float64{}
	var order []cell
	out := make([]bench.Row, 0, len(rows))
	for _, r := range rows {
		for _, p := range ownParts {
			if r.Metric == p {
				c := cell{bench.SubjectOf(r), r.Services, r.Endpoints, r.Rep}
				if _, seen := own[c]; !seen {
					order = append(order, c)
				}
				own[c] += r.Value
			}
		}
		if to, ok := renamed[r.Metric]; ok {
			r.Metric = to
		}
		out = append(out, r)
	}
	for _, c := range order {
		out = append(out, bench.Row{Mode: c.s.Mode, Method: c.s.Method, Backend: c.s.Backend, Services: c.n, Endpoints: c.e,
			Metric: "cold_own", Rep: c.rep, Value: own[c], Unit: bench.UnitSeconds})
	}
	return out
}
