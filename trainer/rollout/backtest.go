package rollout

import (
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// Backtest runs the greedy policy over bars r of ds. It asks greedy for
// many observations per call (sim.BacktestBatch: the flat decisions of
// every bar, then held positions in chains) and books the report a
// bar-by-bar sim.Backtest books, since a row's greedy action depends on
// that row alone. An error of greedy fails the backtest; every backend and
// the checkpoint policy (trainer/policy) backtest through it.
func Backtest(ds *market.Dataset, r market.Range, greedy Greedy) (sim.Report, error) {
	rep, _, err := BacktestStats(ds, r, greedy, nil)
	return rep, err
}

// BacktestStats is Backtest with the benchmarks of the range (nil: computed
// here), returning how the actions were decided.
func BacktestStats(ds *market.Dataset, r market.Range, greedy Greedy, b *sim.Benchmarks) (sim.Report, sim.BatchStats, error) {
	return sim.BacktestBatch(ds, r, batchGreedy(greedy), b)
}

// batchGreedy adapts a Greedy function to sim.BatchPolicy.
type batchGreedy Greedy

// ActBatch writes the greedy actions of rows observations.
func (g batchGreedy) ActBatch(obs []float32, rows int, dst []market.Action) error {
	return g(obs, rows, dst)
}
