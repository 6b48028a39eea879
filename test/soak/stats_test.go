//go:build soak

package soak

import (
	"math"
	"testing"
)

// slope is the least-squares slope of y over x.
func slope(x, y []float64) float64 {
	n := float64(len(x))
	if len(x) < 2 {
		return math.NaN()
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func TestSlope(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4}
	// Noise symmetric about the middle keeps the line's slope.
	y := []float64{10 + 1, 12 - 1, 14, 16 - 1, 18 + 1}
	if got := slope(x, y); math.Abs(got-2) > 1e-9 {
		t.Errorf("slope = %v, want 2", got)
	}
	if got := slope([]float64{1, 2, 3}, []float64{7, 7, 7}); got != 0 {
		t.Errorf("flat slope = %v, want 0", got)
	}
	if got := slope([]float64{1}, []float64{1}); !math.IsNaN(got) {
		t.Errorf("one point: slope = %v, want NaN", got)
	}
}
