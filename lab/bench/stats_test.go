package bench

import (
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	v := make([]float64, 20)
	for i := range v {
		v[i] = float64(20 - i) // 20, 19, ..., 1: unsorted on purpose
	}
	for _, tc := range []struct{ q, want float64 }{{0, 1}, {0.5, 10}, {0.9, 18}, {1, 20}} {
		if got := Percentile(v, tc.q); got != tc.want {
			t.Errorf("Percentile(1..20, %g) = %g, want %g", tc.q, got, tc.want)
		}
	}
	if p99 := Percentile(v, 0.99); p99 <= 19 || p99 >= 20 {
		t.Errorf("p99 of 1..20 = %g, want between the two largest", p99)
	}
	if v[0] != 20 {
		t.Error("Percentile sorted its argument in place")
	}
	if !math.IsNaN(Percentile(nil, 0.5)) {
		t.Error("Percentile of nothing is not NaN")
	}
}

func TestFitPowerLaw(t *testing.T) {
	xs := []float64{100, 1000, 5000, 10000}
	for _, k := range []float64{0, 0.5, 1, 2.6} {
		ys := make([]float64, len(xs))
		for i, x := range xs {
			ys[i] = 3e-3 * math.Pow(x, k)
		}
		f, ok := FitPowerLaw(xs, ys)
		if !ok || math.Abs(f.Exponent-k) > 1e-9 || f.Points != 4 {
			t.Errorf("y = 3e-3 x^%g: fit %+v, ok %v", k, f, ok)
		}
		if k != 0 && math.Abs(f.R2-1) > 1e-9 {
			t.Errorf("y = 3e-3 x^%g: R² %g, want 1", k, f.R2)
		}
	}
	// Points that cannot be on log axes are left out, and one point is no fit.
	if _, ok := FitPowerLaw([]float64{0, 100}, []float64{1, 2}); ok {
		t.Error("fit through one usable point")
	}
	f, ok := FitPowerLaw([]float64{10, 100, 1000}, []float64{1, 0, 100})
	if !ok || f.Points != 2 || math.Abs(f.Exponent-1) > 1e-9 {
		t.Errorf("fit skipping a zero: %+v, %v", f, ok)
	}
}
