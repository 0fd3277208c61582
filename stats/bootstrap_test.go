package stats_test

import (
	"math"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/stats"
)

// TestBootstrapIsDeterministic: the same seed and inputs give the same
// interval to the bit; another seed gives another.
func TestBootstrapIsDeterministic(t *testing.T) {
	r := ar1(newRNG(7), 3000, 0.05, 0.2, 1)
	a, err := stats.Bootstrap{Seed: 42}.Sharpe(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := stats.Bootstrap{Seed: 42}.Sharpe(r)
	c, _ := stats.Bootstrap{Seed: 43}.Sharpe(r)
	if a != b {
		t.Errorf("same seed: %+v then %+v", a, b)
	}
	if a.Lo == c.Lo && a.Hi == c.Hi {
		t.Errorf("seeds 42 and 43 gave the same interval %+v", a)
	}
	if a.Estimate != stats.Sharpe(r) || a.Resamples != stats.DefaultResamples || a.Level != stats.DefaultLevel ||
		a.Scheme != stats.Circular || a.Seed != 42 || !(a.BlockLen >= 1) {
		t.Errorf("interval does not report what it was drawn with: %+v", a)
	}
	if !(a.Lo < a.Estimate && a.Estimate < a.Hi) {
		t.Errorf("interval [%v, %v] does not hold the estimate %v", a.Lo, a.Hi, a.Estimate)
	}
}

// TestSharpeIntervalIsTheStatisticOfSharpe: Sharpe is Statistic with
// stats.Sharpe under the same seed and block length (the same blocks),
// bit for bit, and Annualised scales every end by √barsPerYear.
func TestSharpeIntervalIsTheStatisticOfSharpe(t *testing.T) {
	r := ar1(newRNG(8), 2000, 0.03, 0.4, 1)
	for _, scheme := range []stats.Scheme{stats.Stationary, stats.Circular} {
		b := stats.Bootstrap{Scheme: scheme, Seed: 9, Resamples: 300}
		iv, err := b.Sharpe(r)
		if err != nil {
			t.Fatal(err)
		}
		b.BlockLen = iv.BlockLen
		gen, err := b.Statistic(r, stats.Sharpe)
		if err != nil {
			t.Fatal(err)
		}
		if iv != gen {
			t.Errorf("%s: Sharpe %+v, Statistic(Sharpe) %+v", scheme, iv, gen)
		}
		a := iv.Annualised(252)
		f := math.Sqrt(252)
		if a.Estimate != iv.Estimate*f || a.Lo != iv.Lo*f || a.Hi != iv.Hi*f || a.BlockLen != iv.BlockLen {
			t.Errorf("%s: Annualised(252) = %+v from %+v", scheme, a, iv)
		}
	}
}

// TestResamplesAreBlocksOfTheSeries looks inside the resamples: with the
// series 0, 1, …, n−1 each resample is a run of blocks of consecutive
// bars (wrapping from n−1 to 0). Circular blocks have the length
// ⌈BlockLen⌉ (the last one cut at n bars); stationary ones are geometric
// with mean BlockLen: their mean within 3 % of it and the share of
// one-bar blocks within 0.01 of p = 1/BlockLen (about 13 000 blocks are
// drawn; two blocks that happen to join read as one, a 1/n chance each).
func TestResamplesAreBlocksOfTheSeries(t *testing.T) {
	const n = 500
	idx := make([]float64, n)
	for i := range idx {
		idx[i] = float64(i)
	}
	for _, c := range []struct {
		scheme stats.Scheme
		len    float64
	}{{stats.Stationary, 7.5}, {stats.Stationary, 1}, {stats.Circular, 7.5}, {stats.Circular, 1}} {
		var runs []int
		bad := ""
		stat := func(s []float64) float64 {
			l := 1
			for t := 1; t < len(s); t++ {
				if s[t] == s[t-1]+1 || s[t] == 0 && s[t-1] == n-1 {
					l++
					continue
				}
				runs = append(runs, l)
				l = 1
			}
			if len(s) != n || slices.ContainsFunc(s, func(v float64) bool { return v != math.Trunc(v) || v < 0 || v >= n }) {
				bad = "a resample holds values that are not bars of the series"
			}
			// The last run may be cut at n bars: not counted.
			return 0
		}
		_, err := stats.Bootstrap{Scheme: c.scheme, BlockLen: c.len, Resamples: 200, Seed: 1}.Statistic(idx, stat)
		if err != nil {
			t.Fatal(err)
		}
		if bad != "" {
			t.Fatalf("%s: %s", c.scheme, bad)
		}
		mean, ones := 0.0, 0.0
		for _, l := range runs {
			mean += float64(l)
			if l == 1 {
				ones++
			}
		}
		mean /= float64(len(runs))
		ones /= float64(len(runs))
		t.Logf("%s, block length %v: %d blocks, mean length %.3f, %.4f of one bar", c.scheme, c.len, len(runs), mean, ones)
		switch c.scheme {
		case stats.Circular:
			want := int(math.Ceil(c.len))
			for _, l := range runs {
				// Two adjacent blocks that happen to join read as one of a
				// multiple of the length.
				if l%want != 0 {
					t.Fatalf("circular block of length %d, want multiples of %d", l, want)
				}
			}
		case stats.Stationary:
			if math.Abs(mean/c.len-1) > 0.03 || math.Abs(ones-1/c.len) > 0.01 {
				t.Errorf("stationary blocks: mean length %.3f, %.4f of one bar; want %v within 3 %% and %.4f ± 0.01",
					mean, ones, c.len, 1/c.len)
			}
		}
	}
}

// TestPairedResamplesShareTheirBars: SharpeDiff and Joint resample every
// series with the same blocks, so bar t of one resample is bar t of the
// other.
func TestPairedResamplesShareTheirBars(t *testing.T) {
	const n = 300
	a, c := make([]float64, n), make([]float64, n)
	for i := range a {
		a[i], c[i] = float64(i), float64(i)+1e6
	}
	checked := 0
	_, err := stats.Bootstrap{Resamples: 100, BlockLen: 5}.Joint([][]float64{a, c, a}, func(s [][]float64) float64 {
		for i := range s[0] {
			if s[1][i] != s[0][i]+1e6 || s[2][i] != s[0][i] {
				t.Fatalf("resample %d, bar %d: %v, %v, %v are not the same bar", checked, i, s[0][i], s[1][i], s[2][i])
			}
		}
		checked++
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked != 101 {
		t.Errorf("statistic evaluated %d times, want 101 (the series and 100 resamples)", checked)
	}
	r := ar1(newRNG(10), 1000, 0.02, 0.1, 1)
	d, err := stats.Bootstrap{}.SharpeDiff(r, r)
	if err != nil {
		t.Fatal(err)
	}
	if d.Estimate != 0 || d.Lo != 0 || d.Hi != 0 {
		t.Errorf("SharpeDiff of a series with itself: %+v, want exactly 0 throughout", d)
	}
}

// TestSharpeDiffCancelsWhatTheBarsShare: two strategies that share a
// large common return m_t (the market) and differ by small independent
// parts. Resampled on the same bars the common part cancels, so the
// interval of the difference is far narrower (here less than a third)
// than the one the two separate intervals would imply, √(w_a² + w_c²).
func TestSharpeDiffCancelsWhatTheBarsShare(t *testing.T) {
	const n = 2000
	rng := newRNG(11)
	a, c := make([]float64, n), make([]float64, n)
	for i := range a {
		m := 0.05 + rng.NormFloat64()
		a[i] = m + 0.2*rng.NormFloat64() + 0.01
		c[i] = m + 0.2*rng.NormFloat64()
	}
	b := stats.Bootstrap{Seed: 3}
	d, err := b.SharpeDiff(a, c)
	if err != nil {
		t.Fatal(err)
	}
	ia, _ := b.Sharpe(a)
	ic, _ := b.Sharpe(c)
	wa, wc, wd := ia.Hi-ia.Lo, ic.Hi-ic.Lo, d.Hi-d.Lo
	t.Logf("widths: a %.4f, c %.4f, paired difference %.4f (unpaired would be %.4f)", wa, wc, wd, math.Hypot(wa, wc))
	if wd > math.Hypot(wa, wc)/3 {
		t.Errorf("paired width %.4f is not below a third of the unpaired %.4f", wd, math.Hypot(wa, wc))
	}
	if d.Estimate != stats.Sharpe(a)-stats.Sharpe(c) {
		t.Errorf("estimate %v, want Sharpe(a) − Sharpe(c) = %v", d.Estimate, stats.Sharpe(a)-stats.Sharpe(c))
	}
}

// TestStatisticMayReorderItsInput: a statistic that sorts its argument in
// place (here the 5 % quantile of the returns) leaves the caller's series
// as it was and gets the same interval as one that sorts a copy.
func TestStatisticMayReorderItsInput(t *testing.T) {
	r := ar1(newRNG(15), 400, 0.01, 0.2, 1)
	orig := slices.Clone(r)
	q5 := func(s []float64) float64 { slices.Sort(s); return s[len(s)/20] }
	b := stats.Bootstrap{Seed: 4, BlockLen: 4, Resamples: 200}
	inPlace, err := b.Statistic(r, q5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r, orig) {
		t.Fatal("the statistic's sorting reached the caller's series")
	}
	copied, _ := b.Statistic(r, func(s []float64) float64 { return q5(slices.Clone(s)) })
	if inPlace != copied {
		t.Errorf("sorting in place gave %+v, sorting a copy %+v", inPlace, copied)
	}
}

func TestBootstrapRejectsBadInput(t *testing.T) {
	good := ar1(newRNG(12), 100, 0.01, 0, 1)
	withNaN := slices.Clone(good)
	withNaN[42] = math.NaN()
	sharpe := func(b stats.Bootstrap, r []float64) error { _, err := b.Sharpe(r); return err }
	cases := []struct {
		name  string
		err   error
		parts []string
	}{
		{"NaN return", sharpe(stats.Bootstrap{}, withNaN), []string{"returns[42]", "NaN"}},
		{"too short", sharpe(stats.Bootstrap{}, good[:9]), []string{"returns", "9 values", "at least 10"}},
		{"scheme", sharpe(stats.Bootstrap{Scheme: "moving"}, good), []string{`scheme "moving"`, `"stationary"`, `"circular"`}},
		{"level", sharpe(stats.Bootstrap{Level: 95}, good), []string{"level 95", "(0, 1)"}},
		{"resamples", sharpe(stats.Bootstrap{Resamples: 20}, good), []string{"resamples 20", "needs between 40 and"}},
		{"negative resamples", sharpe(stats.Bootstrap{Resamples: -1}, good), []string{"resamples -1"}},
		{"block length", sharpe(stats.Bootstrap{BlockLen: 101}, good), []string{"block length 101", "[1, 100]"}},
		{"block length below 1", sharpe(stats.Bootstrap{BlockLen: 0.5}, good), []string{"block length 0.5"}},
		{"paired lengths", func() error { _, err := stats.Bootstrap{}.SharpeDiff(good, good[:99]); return err }(),
			[]string{"c has 99 values and a 100", "same bars"}},
		{"paired NaN", func() error { _, err := stats.Bootstrap{}.SharpeDiff(good, withNaN); return err }(),
			[]string{"c[42]", "NaN"}},
		{"joint lengths", func() error {
			_, err := stats.Bootstrap{}.Joint([][]float64{good, good, good[:50]}, func([][]float64) float64 { return 0 })
			return err
		}(), []string{"series[2] has 50 values"}},
		{"statistic NaN", func() error {
			calls := 0
			_, err := stats.Bootstrap{}.Statistic(good, func(s []float64) float64 {
				if calls++; calls == 1 {
					return 0 // the observed series
				}
				return math.NaN()
			})
			return err
		}(), []string{"resample 0", "NaN", "finite on every resample"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantInputErr(t, c.err, c.parts...) })
	}
}

// TestIntervalWidthMatchesTheAnalyticStdErr: on iid normal returns (SR
// 0.1 a bar, 2000 bars) a 95 % percentile interval should be about
// 2·1.96 standard errors wide, with Lo's SE √((1 + SR²/2)/n) = 0.022416.
// Over 20 series the mean width must be within 5 % of 2·1.96·SE (the
// Monte-Carlo error of the mean width is about 1.5 %; measured −1.7 % and
// −0.8 %), for both schemes.
func TestIntervalWidthMatchesTheAnalyticStdErr(t *testing.T) {
	const n, series, sr = 2000, 20, 0.1
	se := stats.SharpeEstimate{N: n, SR: sr, Kurt: 3}.StdErr()
	want := 2 * stats.NormQuantile(0.975) * se
	for _, scheme := range []stats.Scheme{stats.Stationary, stats.Circular} {
		sum, blocks := 0.0, 0.0
		for i := range series {
			r := ar1(newRNG(uint64(100+i)), n, sr, 0, 1)
			iv, err := stats.Bootstrap{Scheme: scheme, Seed: uint64(i)}.Sharpe(r)
			if err != nil {
				t.Fatal(err)
			}
			sum += iv.Hi - iv.Lo
			blocks += iv.BlockLen
		}
		got := sum / series
		t.Logf("%s: mean width %.5f, 2·1.96·SE %.5f (%+.2f %%), mean block length %.2f", scheme, got, want, 100*(got/want-1), blocks/series)
		if math.Abs(got/want-1) > 0.05 {
			t.Errorf("%s: mean width %.5f is not within 5 %% of %.5f", scheme, got, want)
		}
	}
}

// volRegimes simulates n returns mu + σ_t·z_t whose volatility σ_t
// switches between 0.5 and 2 with probability 0.01 a bar (regimes of 100
// bars on average): uncorrelated returns whose squares are strongly
// dependent, as volatility clustering makes them.
func volRegimes(seed uint64, n int, mu float64) []float64 {
	rng := newRNG(seed)
	r := make([]float64, n)
	hi := rng.IntN(2) == 1
	for t := range r {
		if rng.Float64() < 0.01 {
			hi = !hi
		}
		s := 0.5
		if hi {
			s = 2
		}
		r[t] = mu + s*rng.NormFloat64()
	}
	return r
}

// TestSharpeBlockLengthFollowsVolatilityClustering: the Sharpe ratio's
// influence series ψ carries the dependence of the squared returns with
// weight SR/2, so with a large per-bar Sharpe ratio (0.7 here) and
// volatility regimes Bootstrap.Sharpe must choose far longer blocks than
// OptimalBlockLength of the returns (which see no autocorrelation), and
// get closer to the Sharpe ratio's true spread. Measured over 40 series
// of 2000 bars: blocks of 28 against 3.0, half-widths/1.96 of 0.047
// against 0.030, the true standard deviation being 0.096: better, still
// too narrow, because Politis and White's rule cannot see autocorrelations
// as weak and long as these at n = 2000 (see the package's doc).
func TestSharpeBlockLengthFollowsVolatilityClustering(t *testing.T) {
	const series, n = 40, 2000
	var srs []float64
	var wPsi, wRet, bPsi, bRet float64
	for i := range series {
		r := volRegimes(uint64(i), n, 1)
		srs = append(srs, stats.Sharpe(r))
		iv, err := stats.Bootstrap{Seed: uint64(i), Resamples: 499}.Sharpe(r)
		if err != nil {
			t.Fatal(err)
		}
		_, cb, err := stats.OptimalBlockLength(r)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := stats.Bootstrap{Seed: uint64(i), Resamples: 499, BlockLen: cb}.Sharpe(r)
		if err != nil {
			t.Fatal(err)
		}
		wPsi += iv.Hi - iv.Lo
		wRet += plain.Hi - plain.Lo
		bPsi += iv.BlockLen
		bRet += plain.BlockLen
	}
	t.Logf("mean SR %.3f, its standard deviation %.4f; blocks from ψ %.1f (half-width/1.96 %.4f), from the returns %.1f (%.4f)",
		stats.Mean(srs), stats.StdDev(srs), bPsi/series, wPsi/series/3.92, bRet/series, wRet/series/3.92)
	if bPsi < 4*bRet || wPsi < 1.25*wRet {
		t.Errorf("blocks from ψ %.1f against %.1f from the returns, widths %.4f against %.4f: want 4 times longer blocks and 25 %% wider intervals",
			bPsi/series, bRet/series, wPsi/series, wRet/series)
	}
}

// TestFlatSeriesHasAZeroInterval: an agent that stays flat has returns of
// 0 throughout; its Sharpe ratio is 0 by definition and so is every
// resample's, so its interval is [0, 0] with blocks of one bar, and its
// difference from a trading baseline is that baseline's interval negated.
func TestFlatSeriesHasAZeroInterval(t *testing.T) {
	flat := make([]float64, 500)
	iv, err := stats.Bootstrap{Seed: 1}.Sharpe(flat)
	if err != nil {
		t.Fatal(err)
	}
	if iv.Estimate != 0 || iv.Lo != 0 || iv.Hi != 0 || iv.BlockLen != 1 {
		t.Errorf("flat series: %+v, want [0, 0] with blocks of one bar", iv)
	}
	base := ar1(newRNG(14), 500, 0.05, 0, 1)
	b := stats.Bootstrap{Seed: 2, BlockLen: 3}
	d, err := b.SharpeDiff(flat, base)
	if err != nil {
		t.Fatal(err)
	}
	ib, _ := b.Sharpe(base)
	if !near(d.Lo, -ib.Hi, 1e-15) || !near(d.Hi, -ib.Lo, 1e-15) || d.Estimate != -ib.Estimate {
		t.Errorf("flat − baseline: %+v; want the baseline's %+v negated", d, ib)
	}
}
