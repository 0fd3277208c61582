package policy_test

import (
	"context"
	"os"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/policy"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// BenchmarkBacktestCheckpoint backtests a trained checkpoint's greedy
// policy on the CPU over the last 8,000 bars of a data file (all of them
// when fewer), the batched backtest every trainer and the evaluate
// activity run, and reports the policy's calls and rows per backtest
// beside the time. A network's cost per row makes the rows count here,
// unlike BenchmarkBacktestBatch's nearly free policy in market.
//
//	DQNFLOW_BENCH_CHECKPOINT  the checkpoint (.safetensors); skipped without it
//	DQNFLOW_BENCH_DATA        price CSV, bundled:NAME or synthetic (default bundled:USA500IDXUSD_H1.csv)
func BenchmarkBacktestCheckpoint(b *testing.B) {
	path := os.Getenv("DQNFLOW_BENCH_CHECKPOINT")
	if path == "" {
		b.Skip("set DQNFLOW_BENCH_CHECKPOINT to a checkpoint file")
	}
	data := os.Getenv("DQNFLOW_BENCH_DATA")
	if data == "" {
		data = "bundled:USA500IDXUSD_H1.csv"
	}
	ck, _, err := checkpoint.Read(context.Background(), path, checkpoint.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := policy.Load(ck)
	if err != nil {
		b.Fatal(err)
	}
	src, err := prices.Source{}.Allow(data) // named by the person running the benchmark
	if err != nil {
		b.Fatal(err)
	}
	_, ds, err := trainer.CheckpointDataset(context.Background(), src, ck, data, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := market.Range{From: max(ds.Valid.From, ds.Valid.To-8000), To: ds.Valid.To}
	var st sim.BatchStats
	for b.Loop() {
		if _, st, err = rollout.BacktestStats(ds, r, p.Greedy, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Rounds), "calls/op")
	b.ReportMetric(float64(st.Evaluated), "rows/op")
	b.ReportMetric(float64(r.Len()), "bars")
}
