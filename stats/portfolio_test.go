package stats_test

import (
	"math"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/stats"
)

// TestEqualRiskPortfolioAveragesThePresentSeries: worked by hand, with
// NaN where a series has no bar:
//
//	bar 0: (0.01 + 0.03)/2          = 0.02
//	bar 1: (0.02 − 0.01)/2          = 0.005
//	bar 2: 0.03 alone               = 0.03
//	bar 3: (−0.02 + 0 + 0.04)/3     = 0.02/3
func TestEqualRiskPortfolioAveragesThePresentSeries(t *testing.T) {
	nan := math.NaN()
	got, err := stats.EqualRiskPortfolio([][]float64{
		{0.01, nan, 0.03, -0.02},
		{0.03, 0.02, nan, 0.00},
		{nan, -0.01, nan, 0.04},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.02, 0.005, 0.03, 0.02 / 3}
	for i := range want {
		if !near(got[i], want[i], 1e-17) {
			t.Errorf("bar %d: %.17g, want %.17g", i, got[i], want[i])
		}
	}
	one := []float64{0.01, -0.02, 0.005}
	if got, _ := stats.EqualRiskPortfolio([][]float64{one}); !slices.Equal(got, one) {
		t.Errorf("portfolio of one series is %v, want the series %v", got, one)
	}
}

func TestEqualRiskPortfolioRejectsBadInput(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name  string
		in    [][]float64
		parts []string
	}{
		{"none", nil, []string{"no series"}},
		{"lengths", [][]float64{{0, 0, 0}, {0, 0}}, []string{"returns[1] has 2 bars and returns[0] 3", "one calendar"}},
		{"Inf", [][]float64{{0, 0, 0}, {0, math.Inf(1), 0}}, []string{"returns[1][1]", "+Inf", "NaN for no bar"}},
		{"empty bar", [][]float64{{0, nan, 0}, {0, nan, 0}}, []string{"bar 1", "no series"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := stats.EqualRiskPortfolio(c.in)
			wantInputErr(t, err, c.parts...)
		})
	}
}
