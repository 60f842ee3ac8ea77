package specs

import (
	"fmt"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// uniformAlpha is the false-failure rate of one uniformity test: the chance that
// counts drawn from a truly uniform choice fail it. A mode runs three such tests,
// and CI runs six modes (iptables-nft, iptables-legacy and kube-proxy's nftables,
// iptables-nft and iptables-legacy on the host; ipvs in the VM: scripts/test.sh),
// besides the negative controls, which must fail: they fail a CI run falsely about
// once in 5,600 runs (18 x 1e-5).
const uniformAlpha = 1e-5

// uniformity is Pearson's chi-square test of counts against a uniform choice.
type uniformity struct {
	Counts   map[string]int
	Stat     float64
	Critical float64
}

// Uniform tells whether the counts are consistent with a uniform choice at level
// uniformAlpha.
func (u uniformity) Uniform() bool { return u.Stat <= u.Critical }

func (u uniformity) String() string {
	keys := make([]string, 0, len(u.Counts))
	for k := range u.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s=%d ", k, u.Counts[k])
	}
	return fmt.Sprintf("%schi2=%.2f critical=%.2f (df=%d, alpha=%g)", s, u.Stat, u.Critical, len(u.Counts)-1, uniformAlpha)
}

// chiSquareUniform tests counts over the backends in want (a backend never seen
// counts as zero).
func chiSquareUniform(counts map[string]int, want []string) uniformity {
	n := 0
	full := map[string]int{}
	for _, b := range want {
		full[b] = counts[b]
		n += counts[b]
	}
	expected := float64(n) / float64(len(want))
	stat := 0.0
	for _, b := range want {
		d := float64(full[b]) - expected
		stat += d * d / expected
	}
	df := float64(len(want) - 1)
	return uniformity{Counts: full, Stat: stat, Critical: distuv.ChiSquared{K: df}.Quantile(1 - uniformAlpha)}
}
