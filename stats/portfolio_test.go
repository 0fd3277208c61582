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

// TestInverseVolWeightsUseOnlyThePast: by hand, window 3 and at least 2
// past values. Series 0's past at bar 2 is {0.01, −0.01} (sd √2·0.01), at
// bar 3 {0.01, −0.01, 0.03} (sd 0.02), at bar 4 the last three before it,
// {−0.01, 0.03, NaN skipped…} = {−0.01, 0.03, 0.01} (sd 0.02). Changing a
// value changes no weight at or before its bar.
func TestInverseVolWeightsUseOnlyThePast(t *testing.T) {
	nan := math.NaN()
	s0 := []float64{0.01, -0.01, 0.03, 0.01, nan, 0.05}
	w, err := stats.InverseVolWeights([][]float64{s0}, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{nan, nan, 1 / (math.Sqrt2 * 0.01), 1 / 0.02, nan, 1 / 0.02}
	for i := range want {
		if math.IsNaN(want[i]) != math.IsNaN(w[0][i]) || !math.IsNaN(want[i]) && !near(w[0][i], want[i], 1e-9) {
			t.Errorf("bar %d: weight %v, want %v", i, w[0][i], want[i])
		}
	}
	changed := slices.Clone(s0)
	changed[3] = 0.5
	w2, _ := stats.InverseVolWeights([][]float64{changed}, 3, 2)
	for i := 0; i <= 3; i++ {
		if !(math.IsNaN(w[0][i]) && math.IsNaN(w2[0][i])) && w[0][i] != w2[0][i] {
			t.Errorf("bar %d: weight %v became %v when bar 3's value changed: it looked ahead", i, w[0][i], w2[0][i])
		}
	}
	if w2[0][5] == w[0][5] {
		t.Errorf("bar 5's weight did not change with bar 3's value, which is in its window")
	}
	if _, err := stats.InverseVolWeights([][]float64{s0}, 3, 4); err == nil {
		t.Errorf("minObs above the window: no error")
	}
}

// TestWeightedPortfolioSplitsCapitalByWeight: bar 0 weights 1 and 3,
// (0.04 + 3·0)/4 = 0.01; bar 1 only series 1 present: its return; bar 2
// no weight anywhere: NaN. Weights 1 give EqualRiskPortfolio.
func TestWeightedPortfolioSplitsCapitalByWeight(t *testing.T) {
	nan := math.NaN()
	r := [][]float64{{0.04, nan, 0.01}, {0, 0.02, 0.03}}
	got, err := stats.WeightedPortfolio(r, [][]float64{{1, 1, nan}, {3, 3, nan}})
	if err != nil {
		t.Fatal(err)
	}
	if !near(got[0], 0.01, 1e-17) || !near(got[1], 0.02, 1e-17) || !math.IsNaN(got[2]) {
		t.Errorf("portfolio %v, want [0.01 0.02 NaN]", got)
	}
	eq, _ := stats.EqualRiskPortfolio(r)
	ones, _ := stats.WeightedPortfolio(r, [][]float64{{1, 1, 1}, {1, 1, 1}})
	for i := range eq {
		if !near(eq[i], ones[i], 1e-17) {
			t.Errorf("bar %d: weights 1 give %v, EqualRiskPortfolio %v", i, ones[i], eq[i])
		}
	}
	_, err = stats.WeightedPortfolio(r, [][]float64{{1, 0, 1}, {1, 1, 1}})
	wantInputErr(t, err, "weights[0][1]", "positive")
}
