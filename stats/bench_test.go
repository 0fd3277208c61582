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
// 100 000 bars from 1000 resamples, for each scheme, with the block
// length chosen from the data (reported as block_len) and with blocks of
// one bar (the iid bootstrap, the most blocks a resample can have).
func BenchmarkBootstrapSharpe(b *testing.B) {
	r := benchReturns(1)
	for _, c := range []struct {
		name string
		boot stats.Bootstrap
	}{
		{"circular/auto", stats.Bootstrap{Scheme: stats.Circular}},
		{"stationary/auto", stats.Bootstrap{Scheme: stats.Stationary}},
		{"circular/block=1", stats.Bootstrap{Scheme: stats.Circular, BlockLen: 1}},
		{"stationary/block=1", stats.Bootstrap{Scheme: stats.Stationary, BlockLen: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var iv stats.Interval
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if iv, err = c.boot.Sharpe(r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(iv.BlockLen, "block_len")
		})
	}
}

// BenchmarkBootstrapSharpeDiff is the paired interval of the difference
// of two strategies' Sharpe ratios on the same 100 000 bars, 1000
// resamples, the block length chosen from the data.
func BenchmarkBootstrapSharpeDiff(b *testing.B) {
	a, c := benchReturns(1), benchReturns(2)
	var iv stats.Interval
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if iv, err = (stats.Bootstrap{}).SharpeDiff(a, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(iv.BlockLen, "block_len")
}

// BenchmarkOptimalBlockLength is the automatic block length of 100 000
// bars, part of every interval above.
func BenchmarkOptimalBlockLength(b *testing.B) {
	r := benchReturns(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := stats.OptimalBlockLength(r); err != nil {
			b.Fatal(err)
		}
	}
}
