package stats_test

import (
	"testing"

	"github.com/dqnflow/dqnflow/stats"
)

// benchReturns is 100 000 bars of AR(1) returns (φ = 0.1, SR 0.02 a bar),
// about twenty years of hourly FX bars.
func benchReturns(seed uint64) []float64 {
	return ar1(newRNG(seed), 100_000, 0.02, 0.1, 1)
}

// BenchmarkBootstrapSharpe is one 95 % interval of the Sharpe ratio of
// 100 000 bars from 1000 stationary-bootstrap resamples, the block length
// chosen from the data (reported as block_len).
func BenchmarkBootstrapSharpe(b *testing.B) {
	r := benchReturns(1)
	var iv stats.Interval
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if iv, err = (stats.Bootstrap{Resamples: 1000}).Sharpe(r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(iv.BlockLen, "block_len")
}
