package stats_test

import (
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/stats"
)

// TestWilsonHandWorked compares with the formula evaluated in Python
// (z = NormalDist().inv_cdf(0.975) = 1.959963984540054): 8 of 10 gives
// centre (0.8 + 0.19207)/1.38415 = 0.71674 and half-width 0.22658, so
// [0.490162, 0.943318]; 0 of 10 gives [0, 0.277533] and 10 of 10
// [0.722467, 1].
func TestWilsonHandWorked(t *testing.T) {
	for _, c := range []struct {
		wins, n int
		lo, hi  float64
	}{
		{8, 10, 0.49016247153664183, 0.9433178485456247},
		{0, 10, 0, 0.27753279986288915},
		{10, 10, 0.7224672001371109, 1},
	} {
		p, err := stats.Wilson(c.wins, c.n, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		if !near(p.Lo, c.lo, 1e-15) || !near(p.Hi, c.hi, 1e-15) || p.Share != float64(c.wins)/float64(c.n) || p.Level != 0.95 {
			t.Errorf("Wilson(%d, %d) = %+v, want [%.17g, %.17g]", c.wins, c.n, p, c.lo, c.hi)
		}
	}
}

// TestWilsonCoversTheTrueShare computes the exact coverage of the 95 %
// interval for 30 windows (about the test years a series has), the sum of
// the binomial probabilities of the win counts whose interval holds the
// true win rate p, and compares it with the same sum in Python: any wrong
// bound at any count would change it. Wilson's coverage oscillates around
// the nominal level at small n; it stays within 0.95 ± 0.03 here.
func TestWilsonCoversTheTrueShare(t *testing.T) {
	const n = 30
	for _, c := range []struct{ p, want float64 }{
		{0.1, 0.974173211338091}, {0.3, 0.9297925092157777}, {0.5, 0.9572260547429323},
		{0.6, 0.9615770988935923}, {0.8, 0.9638612543307479},
	} {
		cov := 0.0
		for k := 0; k <= n; k++ {
			pr, err := stats.Wilson(k, n, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			if pr.Lo <= c.p && c.p <= pr.Hi {
				lg, _ := math.Lgamma(n + 1)
				lk, _ := math.Lgamma(float64(k) + 1)
				lnk, _ := math.Lgamma(float64(n-k) + 1)
				cov += math.Exp(lg - lk - lnk + float64(k)*math.Log(c.p) + float64(n-k)*math.Log1p(-c.p))
			}
		}
		if !near(cov, c.want, 1e-12) || math.Abs(cov-0.95) > 0.03 {
			t.Errorf("p = %.1f: exact coverage %.15f, want %.15f (Python), within 0.95 ± 0.03", c.p, cov, c.want)
		}
	}
}

// TestShareOfWinsCountsStrictWins: a tie is not a win.
func TestShareOfWinsCountsStrictWins(t *testing.T) {
	agent := []float64{1, 2, 3, 0.5, 0}
	baseline := []float64{0.5, 2, 4, 0, 0}
	p, err := stats.ShareOfWins(agent, baseline, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := stats.Wilson(2, 5, 0.95)
	if p != want {
		t.Errorf("ShareOfWins = %+v, want 2 of 5: %+v", p, want)
	}
}

func TestShareOfWinsRejectsBadInput(t *testing.T) {
	_, err := stats.ShareOfWins([]float64{1, 2}, []float64{1}, 0.95)
	wantInputErr(t, err, "agent has 2", "baseline 1")
	_, err = stats.ShareOfWins(nil, nil, 0.95)
	wantInputErr(t, err, "no Sharpe ratios")
	_, err = stats.ShareOfWins([]float64{1, 2}, []float64{1, math.NaN()}, 0.95)
	wantInputErr(t, err, "baseline[1]", "NaN")
	_, err = stats.ShareOfWins([]float64{1}, []float64{0}, 1)
	wantInputErr(t, err, "level 1", "(0, 1)")
	_, err = stats.Wilson(3, 2, 0.95)
	wantInputErr(t, err, "wins 3 of n 2")
}
