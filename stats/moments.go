package stats

import (
	"errors"
	"fmt"
	"math"
)

// ErrInput is wrapped by every error this package returns for bad input;
// the message names the argument, the position and the reason.
var ErrInput = errors.New("stats: bad input")

// inputErr formats an error that wraps ErrInput.
func inputErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInput}, args...)...)
}

// checkFinite returns an error naming name[i] for the first value of x
// that is NaN or ±Inf.
func checkFinite(name string, x []float64) error {
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return inputErr("%s[%d] is %v: every value must be a finite number", name, i, v)
		}
	}
	return nil
}

// Mean is Σx/n, summed in order (0 for no values).
func Mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// StdDev is the sample standard deviation √(Σ(x − x̄)²/(n − 1)), two
// passes (the mean first), so that returns of 1e-4 around a mean of 1e-4
// lose no digits; 0 for fewer than two values.
func StdDev(x []float64) float64 {
	_, sd := meanStdDev(x)
	return sd
}

// meanStdDev is Mean(x) and StdDev(x) with the mean computed once (the
// Sharpe ratio needs both, and the bootstrap computes it a thousand times).
func meanStdDev(x []float64) (mean, sd float64) {
	m := Mean(x)
	if len(x) < 2 {
		return m, 0
	}
	s := 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return m, math.Sqrt(s / float64(len(x)-1))
}

// CentralMoments returns the population central moments
// m_k = Σ(x − x̄)^k / n of x for k = 2, 3, 4, in two passes (x̄ = Mean(x)
// first); all three are NaN when x is empty.
func CentralMoments(x []float64) (m2, m3, m4 float64) {
	n := float64(len(x))
	m := Mean(x)
	for _, v := range x {
		d := v - m
		d2 := d * d
		m2 += d2
		m3 += d2 * d
		m4 += d2 * d2
	}
	return m2 / n, m3 / n, m4 / n
}

// moments returns the skewness γ3 = m3/m2^{3/2} and the kurtosis
// γ4 = m4/m2² (not excess: 3 for a normal distribution) of x, from the
// central moments m_k = Σ(x − x̄)^k / n, as Bailey and López de Prado
// (2014) and Mertens (2002) use them. It reports ok = false when m2 = 0.
func moments(x []float64) (skew, kurt float64, ok bool) {
	m2, m3, m4 := CentralMoments(x)
	if !(m2 > 0) {
		return 0, 0, false
	}
	return m3 / (m2 * math.Sqrt(m2)), m4 / (m2 * m2), true
}
