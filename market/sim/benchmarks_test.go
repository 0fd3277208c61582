package sim_test

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// TestBacktestWithBenchmarksIsBacktest: benchmarks computed once and
// passed to BacktestWith give the report Backtest gives, and benchmarks
// of another range are refused.
func TestBacktestWithBenchmarksIsBacktest(t *testing.T) {
	ds := walkDataset(21, 3000)
	r := market.Range{From: 100, To: 3000}
	policy := func() sim.Policy {
		rng := rand.New(rand.NewPCG(5, 6))
		return policyFunc(func(int, []float32) market.Action {
			return market.Action{Dir: rng.IntN(3), Size: rng.IntN(4), Exit: rng.IntN(3)}
		})
	}
	want, err := sim.Backtest(ds, r, policy())
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.NewBenchmarks(ds, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the benchmarks serve several backtests unchanged
		got, err := sim.BacktestWith(ds, r, policy(), b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("backtest %d with the benchmarks differs from Backtest: %+v vs %+v", i, got.BuyAndHold, want.BuyAndHold)
		}
	}
	other := market.Range{From: 200, To: 3000}
	if _, err := sim.BacktestWith(ds, other, policy(), b); err == nil || !strings.Contains(err.Error(), "benchmarks") {
		t.Errorf("benchmarks of %s for a backtest of %s: %v, want an error naming them", r, other, err)
	}
}
