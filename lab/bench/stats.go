package bench

import (
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"
)

// Percentile is the q-quantile (0..1) of values: gonum's LinInterp, the empirical
// distribution function interpolated linearly (R's type 4). With 20 samples p50
// is the 10th smallest and p99 lies between the two largest: what 20 samples
// can say about a tail.
func Percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	s := slices.Clone(values)
	slices.Sort(s)
	return stat.Quantile(q, stat.LinInterp, s, nil)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	v := make([]float64, len(ds))
	for i, d := range ds {
		v[i] = float64(d)
	}
	return time.Duration(Percentile(v, 0.5)).Round(time.Microsecond)
}

// Fit is a power law y = a·N^k fitted by least squares on log-log axes.
type Fit struct {
	// Exponent is k, the growth exponent: 0 flat, 1 linear, 2 quadratic.
	Exponent float64
	// R2 is the fit's coefficient of determination on log-log axes.
	R2 float64
	// Points is how many sizes the fit used.
	Points int
}

// FitPowerLaw fits y = a·x^k through the points with x > 0 and y > 0. It needs
// two points; with fewer it returns ok false.
func FitPowerLaw(xs, ys []float64) (Fit, bool) {
	var lx, ly []float64
	for i := range xs {
		if xs[i] > 0 && ys[i] > 0 && !math.IsNaN(ys[i]) {
			lx = append(lx, math.Log(xs[i]))
			ly = append(ly, math.Log(ys[i]))
		}
	}
	if len(lx) < 2 {
		return Fit{}, false
	}
	alpha, k := stat.LinearRegression(lx, ly, nil, false)
	return Fit{Exponent: k, R2: stat.RSquared(lx, ly, nil, alpha, k), Points: len(lx)}, true
}
