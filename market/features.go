package market

import (
	"math"
	"runtime"
	"sync"

	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/stats"
)

// FeatureNames names the NumFeatures market features in column order.
// ComputeFeatures documents the formula of each; every one is scale-free
// (log returns, ratios, z-scores, bounded oscillators), so a policy sees
// the same kind of numbers on the S&P near 4,000 and on BTC near 60,000.
// All are computed; data.drop_features zeroes some in the observation (by
// default the hour, weekday and volume features, ADR 0022).
var FeatureNames = [NumFeatures]string{
	"ret_1", "ret_lag1", "ret_lag2", "ret_lag3", "ret_lag4", "ret_lag5", "ret_lag6", "ret_lag7",
	"ret_4", "ret_12", "ret_24", "ret_72", "ret_168",
	"vol_12", "vol_24", "vol_72", "vol_168", "vol_ratio_12_72", "vol_ratio_24_168", "parkinson_24",
	"atr14_rel", "atr50_rel", "range_atr",
	"body_atr", "upper_wick_atr", "lower_wick_atr", "close_loc", "gap",
	"rsi_7", "rsi_14", "rsi_28",
	"z_sma_20", "z_sma_50", "z_sma_200",
	"ema_12_26", "ema_24_96", "close_ema_50", "macd_atr", "macd_hist_atr",
	"pos_24", "pos_72", "pos_168", "dd_72", "dd_168", "up_168",
	"hour_sin", "hour_cos", "dow_sin", "dow_cos",
	"volume_z_24", "volume_ratio_168", "volume_trend_24_168",
	"skew_72", "kurt_72", "autocorr_48", "efficiency_24",
}

// FeatureWarmup is the first bar at which every feature is defined: the
// 200-bar SMA of z_sma_200 needs closes 0..199. (The EMAs and Wilder
// averages are defined from their seed on; by bar 199 the seed's weight in
// the slowest one, EMA96, is (1−2/97)^199 ≈ 1.6%.)
const FeatureWarmup = 199

// ComputeFeatures returns the NumFeatures causal features of every bar,
// row-major (raw[t*NumFeatures+j] is feature j at bar t), and warmup, the
// first bar where all are defined (FeatureWarmup). Rows before warmup are
// zero. The feature at bar t is a function of bars 0..t only: nothing after
// t is read (TestFeaturesHaveNoLookAhead checks it bit for bit).
//
// Notation: C, O, H, L, V the bar's close, open, high, low and volume;
// r_t = ln(C_t/C_{t−1}); sd_n(x) the population standard deviation of the
// last n values of x ending at t; SMA_n and EMA_n (α = 2/(n+1), seeded with
// C_0) of the close; ATR_n Wilder's average true range (ATR); maxH_n, minL_n
// the highest high and lowest low of the last n bars ending at t. A ratio
// whose denominator is zero is 0.
//
//	 #  name                 formula
//	 0  ret_1                r_t
//	 1  ret_lag1..ret_lag7   r_{t−k}, k = 1..7 (columns 1..7)
//	 8  ret_4                ln(C_t/C_{t−4}); likewise ret_12, ret_24, ret_72, ret_168 (8..12)
//	13  vol_12               sd_12(r); likewise vol_24, vol_72, vol_168 (13..16)
//	17  vol_ratio_12_72      ln(vol_12/vol_72)
//	18  vol_ratio_24_168     ln(vol_24/vol_168)
//	19  parkinson_24         √(Σ_{24 bars} ln(H/L)² / (24·4·ln 2))   (Parkinson 1980)
//	20  atr14_rel            ATR_14/C
//	21  atr50_rel            ATR_50/C
//	22  range_atr            (H−L)/ATR_14
//	23  body_atr             (C−O)/ATR_14
//	24  upper_wick_atr       (H−max(O,C))/ATR_14
//	25  lower_wick_atr       (min(O,C)−L)/ATR_14
//	26  close_loc            (C−L)/(H−L) − ½
//	27  gap                  ln(O_t/C_{t−1})
//	28  rsi_7                (RSI_7−50)/50 = (G−D)/(G+D), G, D Wilder averages of up and
//	                         down close changes (Wilder 1978); likewise rsi_14, rsi_28 (28..30)
//	31  z_sma_20             (C − SMA_20)/sd_20(C); likewise z_sma_50, z_sma_200 (31..33)
//	34  ema_12_26            ln(EMA_12/EMA_26)
//	35  ema_24_96            ln(EMA_24/EMA_96)
//	36  close_ema_50         ln(C/EMA_50)
//	37  macd_atr             MACD/ATR_14, MACD = EMA_12 − EMA_26 (Appel)
//	38  macd_hist_atr        (MACD − EMA_9(MACD))/ATR_14
//	39  pos_24               (C − minL_24)/(maxH_24 − minL_24) − ½; likewise pos_72, pos_168 (39..41)
//	42  dd_72                ln(C/maxH_72) ≤ 0, drawdown from the rolling high
//	43  dd_168               ln(C/maxH_168)
//	44  up_168               ln(C/minL_168) ≥ 0, run-up from the rolling low
//	45  hour_sin, hour_cos   sin, cos of 2π·(hour + minute/60)/24 of the bar time, UTC (45, 46)
//	47  dow_sin, dow_cos     sin, cos of 2π·weekday/7, Sunday = 0 (47, 48)
//	49  volume_z_24          (V − mean_24(V))/sd_24(V)                    (0 without volume)
//	50  volume_ratio_168     V/mean_168(V) − 1                            (0 without volume)
//	51  volume_trend_24_168  mean_24(V)/mean_168(V) − 1                   (0 without volume)
//	52  skew_72              m₃/m₂^{3/2} of the last 72 r (central moments, population)
//	53  kurt_72              m₄/m₂² − 3 of the last 72 r (excess kurtosis)
//	54  autocorr_48          Σ_{i=t−46}^{t}(r_i−m)(r_{i−1}−m) / Σ_{i=t−47}^{t}(r_i−m)², m the
//	                         mean of the last 48 r (sample lag-1 autocorrelation)
//	55  efficiency_24        (C_t − C_{t−24}) / Σ_{i=t−23}^{t}|C_i − C_{i−1}| ∈ [−1, 1] (Kaufman)
//
// Bars must hold positive prices (the CSV loader and Synthetic guarantee
// it); then every feature is finite from warmup on.
func ComputeFeatures(b *prices.Bars) (raw []float64, warmup int) {
	n := b.Len()
	raw = make([]float64, n*NumFeatures)
	warmup = FeatureWarmup
	if n <= warmup {
		return raw, warmup
	}
	in := newFeatureInputs(b)
	// Each bar's row is a function of the inputs alone and is written by
	// one goroutine, so the rows come out the same, bit for bit, whatever
	// the split (TestFeaturesAreTheSameInParallel): on the 53,000 bars of
	// the bundled S&P 500 the windows cost about 300 ms on one core, and
	// every run's start, restore and backtest of a file prepares them.
	parallelRanges(warmup, n, featureChunk, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			in.row(t, raw[t*NumFeatures:(t+1)*NumFeatures])
		}
	})
	return raw, warmup
}

// featureChunk is the fewest bars a goroutine of ComputeFeatures takes.
const featureChunk = 2048

// parallelRanges calls f on consecutive pieces of [lo, hi), at most one
// per CPU and none shorter than least bars (but the last), concurrently, and
// returns when every call has.
func parallelRanges(lo, hi, least int, f func(lo, hi int)) {
	parts := max(1, min(runtime.GOMAXPROCS(0), (hi-lo)/least))
	if parts == 1 {
		f(lo, hi)
		return
	}
	var wg sync.WaitGroup
	step := (hi - lo + parts - 1) / parts
	for a := lo; a < hi; a += step {
		wg.Add(1)
		go func(a, b int) {
			defer wg.Done()
			f(a, b)
		}(a, min(a+step, hi))
	}
	wg.Wait()
}

// featureInputs are the series every bar's features are computed from:
// the bars and the recursive averages, which run through the whole series
// once.
type featureInputs struct {
	b                                 *prices.Bars
	r, hl2                            []float64
	atr14, atr50                      []float64
	rsi7, rsi14, rsi28                []float64
	ema12, ema24, ema26, ema50, ema96 []float64
	macd, signal                      []float64
}

func newFeatureInputs(b *prices.Bars) *featureInputs {
	n := b.Len()
	C, H, L := b.Close, b.High, b.Low
	r := make([]float64, n) // r[0] is never read at t ≥ warmup
	for t := 1; t < n; t++ {
		r[t] = math.Log(C[t] / C[t-1])
	}
	hl2 := make([]float64, n) // ln(H/L)²
	for t := range hl2 {
		x := math.Log(H[t] / L[t])
		hl2[t] = x * x
	}
	in := &featureInputs{b: b, r: r, hl2: hl2}
	in.atr14, in.atr50 = ATR(b, 14), ATR(b, 50)
	in.rsi7, in.rsi14, in.rsi28 = rsi(C, 7), rsi(C, 14), rsi(C, 28)
	in.ema12, in.ema24, in.ema26, in.ema50, in.ema96 = ema(C, 12), ema(C, 24), ema(C, 26), ema(C, 50), ema(C, 96)
	in.macd = make([]float64, n)
	for t := range in.macd {
		in.macd[t] = in.ema12[t] - in.ema26[t]
	}
	in.signal = ema(in.macd, 9)
	return in
}

// row writes the NumFeatures features of bar t (t ≥ FeatureWarmup) into f.
func (in *featureInputs) row(t int, f []float64) {
	b := in.b
	C, O, H, L, V := b.Close, b.Open, b.High, b.Low, b.Volume
	r, hl2 := in.r, in.hl2
	atr14, atr50 := in.atr14, in.atr50
	rsi7, rsi14, rsi28 := in.rsi7, in.rsi14, in.rsi28
	ema12, ema24, ema26, ema50, ema96 := in.ema12, in.ema24, in.ema26, in.ema50, in.ema96
	macd, signal := in.macd, in.signal
	win := func(x []float64, k int) []float64 { return x[t-k+1 : t+1] } // last k values ending at t

	for k := 0; k < 8; k++ {
		f[k] = r[t-k] // ret_1, ret_lag1..7
	}
	for k, h := range [5]int{4, 12, 24, 72, 168} {
		f[8+k] = math.Log(C[t] / C[t-h])
	}
	var vols [4]float64
	for k, w := range [4]int{12, 24, 72, 168} {
		_, vols[k] = meanSD(win(r, w))
		f[13+k] = vols[k]
	}
	f[17] = logRatio(vols[0], vols[2])
	f[18] = logRatio(vols[1], vols[3])
	f[19] = math.Sqrt(sum(win(hl2, 24)) / (24 * 4 * math.Ln2))

	f[20] = atr14[t] / C[t]
	f[21] = atr50[t] / C[t]
	f[22] = ratio(H[t]-L[t], atr14[t])
	f[23] = ratio(C[t]-O[t], atr14[t])
	f[24] = ratio(H[t]-max(O[t], C[t]), atr14[t])
	f[25] = ratio(min(O[t], C[t])-L[t], atr14[t])
	if H[t] > L[t] {
		f[26] = (C[t]-L[t])/(H[t]-L[t]) - 0.5
	}
	f[27] = math.Log(O[t] / C[t-1])

	f[28], f[29], f[30] = rsi7[t], rsi14[t], rsi28[t]
	for k, w := range [3]int{20, 50, 200} {
		m, sd := meanSD(win(C, w))
		f[31+k] = ratio(C[t]-m, sd)
	}

	f[34] = math.Log(ema12[t] / ema26[t])
	f[35] = math.Log(ema24[t] / ema96[t])
	f[36] = math.Log(C[t] / ema50[t])
	f[37] = ratio(macd[t], atr14[t])
	f[38] = ratio(macd[t]-signal[t], atr14[t])

	for k, w := range [3]int{24, 72, 168} {
		hi, lo := maxOf(win(H, w)), minOf(win(L, w))
		if hi > lo {
			f[39+k] = (C[t]-lo)/(hi-lo) - 0.5
		}
	}
	f[42] = math.Log(C[t] / maxOf(win(H, 72)))
	f[43] = math.Log(C[t] / maxOf(win(H, 168)))
	f[44] = math.Log(C[t] / minOf(win(L, 168)))

	tm := b.Time[t].UTC()
	hour := 2 * math.Pi * (float64(tm.Hour()) + float64(tm.Minute())/60) / 24
	dow := 2 * math.Pi * float64(tm.Weekday()) / 7
	f[45], f[46], f[47], f[48] = math.Sin(hour), math.Cos(hour), math.Sin(dow), math.Cos(dow)

	if b.HasVolume {
		m24, sd24 := meanSD(win(V, 24))
		m168, _ := meanSD(win(V, 168))
		f[49] = ratio(V[t]-m24, sd24)
		f[50] = ratio(V[t]-m168, m168)
		f[51] = ratio(m24-m168, m168)
	}

	f[52], f[53] = skewKurt(win(r, 72))
	f[54] = lag1Autocorr(win(r, 48))
	path := 0.0
	for i := t - 23; i <= t; i++ {
		path += math.Abs(C[i] - C[i-1])
	}
	f[55] = ratio(C[t]-C[t-24], path)
}

// ATR returns Wilder's average true range over n bars at every bar, in price
// points: TR_t = max(H_t−L_t, |H_t−C_{t−1}|, |L_t−C_{t−1}|) for t ≥ 1,
// ATR_n = mean(TR_1..TR_n), ATR_t = ((n−1)·ATR_{t−1} + TR_t)/n for t > n
// (Wilder 1978). It is causal and 0 before bar n (and everywhere when n < 1
// or the series is too short).
func ATR(b *prices.Bars, n int) []float64 {
	out := make([]float64, b.Len())
	if n < 1 || b.Len() <= n {
		return out
	}
	tr := func(t int) float64 {
		pc := b.Close[t-1]
		return max(b.High[t]-b.Low[t], math.Abs(b.High[t]-pc), math.Abs(b.Low[t]-pc))
	}
	s := 0.0
	for t := 1; t <= n; t++ {
		s += tr(t)
	}
	out[n] = s / float64(n)
	for t := n + 1; t < len(out); t++ {
		out[t] = (float64(n-1)*out[t-1] + tr(t)) / float64(n)
	}
	return out
}

// ema returns the exponential moving average with α = 2/(n+1), seeded with
// x_0: e_0 = x_0, e_t = α·x_t + (1−α)·e_{t−1}.
func ema(x []float64, n int) []float64 {
	out := make([]float64, len(x))
	if len(x) == 0 {
		return out
	}
	a := 2 / float64(n+1)
	out[0] = x[0]
	for t := 1; t < len(x); t++ {
		out[t] = a*x[t] + (1-a)*out[t-1]
	}
	return out
}

// rsi returns Wilder's RSI rescaled to [−1, 1]: (RSI−50)/50 = (G−D)/(G+D),
// with G, D the Wilder averages of the up moves max(ΔC, 0) and down moves
// max(−ΔC, 0): G_n = mean of the first n, then G_t = ((n−1)·G_{t−1} + g_t)/n.
// 0 before bar n and where G+D = 0.
func rsi(c []float64, n int) []float64 {
	out := make([]float64, len(c))
	if len(c) <= n {
		return out
	}
	var g, d float64
	for t := 1; t <= n; t++ {
		dc := c[t] - c[t-1]
		g += max(dc, 0)
		d += max(-dc, 0)
	}
	g, d = g/float64(n), d/float64(n)
	out[n] = ratio(g-d, g+d)
	for t := n + 1; t < len(c); t++ {
		dc := c[t] - c[t-1]
		g = (float64(n-1)*g + max(dc, 0)) / float64(n)
		d = (float64(n-1)*d + max(-dc, 0)) / float64(n)
		out[t] = ratio(g-d, g+d)
	}
	return out
}

func sum(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s
}

// meanSD returns the mean and the population standard deviation (two passes).
func meanSD(x []float64) (mean, sd float64) {
	mean = sum(x) / float64(len(x))
	ss := 0.0
	for _, v := range x {
		d := v - mean
		ss += d * d
	}
	return mean, math.Sqrt(ss / float64(len(x)))
}

// skewKurt returns the skewness m₃/m₂^{3/2} and the excess kurtosis
// m₄/m₂² − 3 from population central moments; 0, 0 when m₂ = 0.
func skewKurt(x []float64) (skew, kurt float64) {
	m2, m3, m4 := stats.CentralMoments(x)
	if m2 == 0 {
		return 0, 0
	}
	return m3 / (m2 * math.Sqrt(m2)), m4/(m2*m2) - 3
}

// lag1Autocorr is the sample lag-1 autocorrelation
// Σ_{i≥1}(x_i−m)(x_{i−1}−m) / Σ_i(x_i−m)²; 0 for a constant window.
func lag1Autocorr(x []float64) float64 {
	m := sum(x) / float64(len(x))
	var num, den float64
	for i, v := range x {
		d := v - m
		den += d * d
		if i > 0 {
			num += d * (x[i-1] - m)
		}
	}
	return ratio(num, den)
}

func maxOf(x []float64) float64 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}

func minOf(x []float64) float64 {
	m := x[0]
	for _, v := range x[1:] {
		m = min(m, v)
	}
	return m
}

// ratio is a/b, or 0 when b is 0 (a flat window has no scale to divide by).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// logRatio is ln(a/b), or 0 unless both are positive.
func logRatio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return math.Log(a / b)
}
