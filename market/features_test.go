package market

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/prices"
)

func featureIndex(t *testing.T, name string) int {
	t.Helper()
	for i, n := range FeatureNames {
		if n == name {
			return i
		}
	}
	t.Fatalf("no feature %q", name)
	return -1
}

func cloneBars(b *prices.Bars) *prices.Bars {
	c := *b
	c.Time = append([]time.Time(nil), b.Time...)
	c.Open = append([]float64(nil), b.Open...)
	c.High = append([]float64(nil), b.High...)
	c.Low = append([]float64(nil), b.Low...)
	c.Close = append([]float64(nil), b.Close...)
	c.Volume = append([]float64(nil), b.Volume...)
	return &c
}

func TestFeatureNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for i, n := range FeatureNames {
		if n == "" || seen[n] {
			t.Errorf("feature %d: name %q empty or repeated", i, n)
		}
		seen[n] = true
	}
}

// TestFeaturesHaveNoLookAhead perturbs every bar after t (all of OHLCV and
// the time) and checks that every feature at bars ≤ t stays bit-identical,
// while later features do change (so the perturbation is felt at all).
func TestFeaturesHaveNoLookAhead(t *testing.T) {
	syn, _, err := Synthetic(700, 21)
	if err != nil {
		t.Fatal(err)
	}
	spx, err := prices.Source{}.Bars(context.Background(), "bundled:USA500IDXUSD_H1.csv")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, b := range []*prices.Bars{syn, spx.Slice(0, 700)} {
		base, warmup := ComputeFeatures(b)
		for _, cut := range []int{warmup - 1, warmup, warmup + 1, 300, 450, 698} {
			got, _ := ComputeFeatures(perturbAfter(b, cut, rng))
			for i := 0; i < (cut+1)*NumFeatures; i++ {
				if math.Float64bits(got[i]) != math.Float64bits(base[i]) {
					t.Fatalf("%s, bars after %d perturbed: feature %s at bar %d changed from %v to %v",
						b.Name, cut, FeatureNames[i%NumFeatures], i/NumFeatures, base[i], got[i])
				}
			}
			changed := 0
			for i := (cut + 1) * NumFeatures; i < len(got); i++ {
				if got[i] != base[i] {
					changed++
				}
			}
			if cut+1 < b.Len() && changed == 0 {
				t.Errorf("%s: perturbing bars after %d changed no later feature", b.Name, cut)
			}
		}
	}
}

// TestFeaturesMatchHandWorkedValues checks features against closed forms on
// a steadily rising series: C_t = 100·g^t with g = 1.01, O_t = C_{t−1},
// H_t = 1.002·C_t, L_t = O_t/1.002, volume alternating 100, 200, hourly
// bars from Monday 2024-01-01 00:00 UTC.
func TestFeaturesMatchHandWorkedValues(t *testing.T) {
	const n, g, w = 260, 1.01, 1.002
	b := &prices.Bars{Name: "rising", HasVolume: true}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		c := 100 * math.Pow(g, float64(i))
		o := c / g
		b.Time = append(b.Time, start.Add(time.Duration(i)*time.Hour))
		b.Open = append(b.Open, o)
		b.Close = append(b.Close, c)
		b.High = append(b.High, c*w)
		b.Low = append(b.Low, o/w)
		b.Volume = append(b.Volume, float64(100+100*(i%2)))
	}
	raw, warmup := ComputeFeatures(b)
	if warmup != FeatureWarmup {
		t.Fatalf("warmup = %d, want %d", warmup, FeatureWarmup)
	}
	const at = 250 // 2024-01-11 10:00, a Thursday; even, so volume 100
	lg := math.Log(g)
	hl := math.Log(w * g * w) // ln(H/L) of every bar
	want := map[string]float64{
		"ret_1":    lg,
		"ret_lag7": lg,
		"ret_24":   24 * lg,
		"ret_168":  168 * lg,
		// (C−L)/(H−L) − ½ with L = C/(g·w), H = w·C.
		"close_loc":    (1-1/(g*w))/(w-1/(g*w)) - 0.5,
		"gap":          0,
		"parkinson_24": hl / (2 * math.Sqrt(math.Ln2)),
		// Only up moves: RSI = 100.
		"rsi_7": 1, "rsi_28": 1,
		// maxH_24 = H_t = w·C_t; minL_24 = L_{t−23} = C_{t−24}/w = C_t/(g^24·w).
		"pos_24":   (1-1/(math.Pow(g, 24)*w))/(w-1/(math.Pow(g, 24)*w)) - 0.5,
		"dd_72":    -math.Log(w),
		"up_168":   168*lg + math.Log(w),
		"hour_sin": math.Sin(2 * math.Pi * 10 / 24), "hour_cos": math.Cos(2 * math.Pi * 10 / 24),
		"dow_sin": math.Sin(2 * math.Pi * 4 / 7), "dow_cos": math.Cos(2 * math.Pi * 4 / 7),
		// Last 24 volumes: twelve 100s and twelve 200s: mean 150, sd 50.
		"volume_z_24":         -1,
		"volume_ratio_168":    100.0/150 - 1,
		"volume_trend_24_168": 0,
		"efficiency_24":       1,
	}
	// z_sma_20 from closed-form sums: C_{t−k} = C_t·q^k with q = 1/g,
	// mean = C_t·S1/20, E[x²] = C_t²·S2/20, S1 = Σ_{k<20} q^k, S2 = Σ q^{2k}.
	q := 1 / g
	s1 := (1 - math.Pow(q, 20)) / (1 - q)
	s2 := (1 - math.Pow(q, 40)) / (1 - q*q)
	mean, msq := s1/20, s2/20
	want["z_sma_20"] = (1 - mean) / math.Sqrt(msq-mean*mean)

	row := raw[at*NumFeatures : (at+1)*NumFeatures]
	for name, v := range want {
		if got := row[featureIndex(t, name)]; math.Abs(got-v) > 1e-9*max(1, math.Abs(v)) {
			t.Errorf("%s at bar %d = %.12g, want %.12g", name, at, got, v)
		}
	}
	// Ratios of the ATR-scaled candle parts cancel the ATR: upper wick
	// (w−1)·C, lower wick O·(1−1/w), range w·C − O/w.
	up, low, rng := row[featureIndex(t, "upper_wick_atr")], row[featureIndex(t, "lower_wick_atr")], row[featureIndex(t, "range_atr")]
	if got, v := up/low, g*w; math.Abs(got-v) > 1e-9 {
		t.Errorf("upper_wick_atr/lower_wick_atr = %.12g, want g·w = %.12g", got, v)
	}
	if got, v := rng/up, (w-1/(g*w))/(w-1); math.Abs(got-v) > 1e-9*v {
		t.Errorf("range_atr/upper_wick_atr = %.12g, want %.12g", got, v)
	}
	for i := 0; i < warmup*NumFeatures; i++ {
		if raw[i] != 0 {
			t.Fatalf("feature %s at bar %d = %v before the warmup, want 0", FeatureNames[i%NumFeatures], i/NumFeatures, raw[i])
		}
	}
}

// TestATRMatchesHandWorkedValues: Wilder's ATR with n = 2 on five bars.
func TestATRMatchesHandWorkedValues(t *testing.T) {
	b := &prices.Bars{
		High:  []float64{10, 12, 11, 15, 14},
		Low:   []float64{9, 10, 8, 12, 13},
		Close: []float64{9.5, 11, 9, 14, 13.5},
	}
	b.Open = b.Close
	// TR_1 = max(2, |12−9.5|, |10−9.5|) = 2.5; TR_2 = max(3, 0, 3) = 3;
	// TR_3 = max(3, 6, 3) = 6; TR_4 = max(1, 0, 1) = 1.
	// ATR_2 = (2.5+3)/2 = 2.75; ATR_3 = (2.75+6)/2 = 4.375; ATR_4 = (4.375+1)/2 = 2.6875.
	want := []float64{0, 0, 2.75, 4.375, 2.6875}
	got := ATR(b, 2)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ATR[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	for _, n := range []int{0, 5, 9} {
		for i, v := range ATR(b, n) {
			if v != 0 {
				t.Errorf("ATR(n=%d)[%d] = %v, want 0 (undefined)", n, i, v)
			}
		}
	}
}

// TestFeatureHelpersMatchHandWorkedValues checks the rolling statistics.
func TestFeatureHelpersMatchHandWorkedValues(t *testing.T) {
	// Closes 10, 11, 10, 12 with n = 2: moves +1, −1, +2.
	// G_2 = 0.5, D_2 = 0.5 → 0; G_3 = (0.5+2)/2 = 1.25, D_3 = 0.25 → 1/1.5.
	r := rsi([]float64{10, 11, 10, 12}, 2)
	if r[0] != 0 || r[1] != 0 || r[2] != 0 || math.Abs(r[3]-1/1.5) > 1e-15 {
		t.Errorf("rsi = %v, want [0 0 0 0.6667]", r)
	}
	// α = 2/(3+1) = 0.5: 1, 1.5, 2.25.
	if e := ema([]float64{1, 2, 3}, 3); e[0] != 1 || e[1] != 1.5 || e[2] != 2.25 {
		t.Errorf("ema = %v, want [1 1.5 2.25]", e)
	}
	// 1, 2, 3, 4, 10: deviations −3, −2, −1, 0, 6; m₂ = 10, m₃ = 36, m₄ = 278.8.
	s, k := skewKurt([]float64{1, 2, 3, 4, 10})
	if math.Abs(s-36/math.Pow(10, 1.5)) > 1e-12 || math.Abs(k-(2.788-3)) > 1e-12 {
		t.Errorf("skew, kurt = %v, %v; want %v, %v", s, k, 36/math.Pow(10, 1.5), 2.788-3)
	}
	// 1, −1, 1, −1: m = 0, Σ products = −3, Σ squares = 4.
	if a := lag1Autocorr([]float64{1, -1, 1, -1}); a != -0.75 {
		t.Errorf("lag1Autocorr = %v, want -0.75", a)
	}
	if m, sd := meanSD([]float64{2, 4, 4, 4, 5, 5, 7, 9}); m != 5 || sd != 2 {
		t.Errorf("meanSD = %v, %v; want 5, 2", m, sd)
	}
}

// TestFeaturesAreFiniteOnBundledData: every feature of both bundled files
// is finite from the warmup on, and no column is constant.
func TestFeaturesAreFiniteOnBundledData(t *testing.T) {
	for _, path := range []string{"bundled:USA500IDXUSD_H1.csv", "bundled:bitcoin_2024.csv"} {
		b, err := prices.Source{}.Bars(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		raw, warmup := ComputeFeatures(b)
		for i := warmup * NumFeatures; i < len(raw); i++ {
			if math.IsNaN(raw[i]) || math.IsInf(raw[i], 0) {
				t.Fatalf("%s: feature %s at bar %d = %v", path, FeatureNames[i%NumFeatures], i/NumFeatures, raw[i])
			}
		}
		for j := range NumFeatures {
			first, constant := raw[warmup*NumFeatures+j], true
			for i := warmup + 1; i < b.Len() && constant; i++ {
				constant = raw[i*NumFeatures+j] == first
			}
			if constant {
				t.Errorf("%s: feature %s is constant %v", path, FeatureNames[j], first)
			}
		}
	}
}

// TestFeaturesAreScaleFree: multiplying every price by 37.5 and the volume
// by 3 leaves every feature unchanged up to rounding.
func TestFeaturesAreScaleFree(t *testing.T) {
	b, _, err := Synthetic(800, 4)
	if err != nil {
		t.Fatal(err)
	}
	s := cloneBars(b)
	for i := range s.Close {
		s.Open[i] *= 37.5
		s.High[i] *= 37.5
		s.Low[i] *= 37.5
		s.Close[i] *= 37.5
		s.Volume[i] *= 3
	}
	a, warmup := ComputeFeatures(b)
	c, _ := ComputeFeatures(s)
	for i := warmup * NumFeatures; i < len(a); i++ {
		if math.Abs(a[i]-c[i]) > 1e-7*max(1, math.Abs(a[i])) {
			t.Fatalf("feature %s at bar %d: %v at price ×1, %v at ×37.5", FeatureNames[i%NumFeatures], i/NumFeatures, a[i], c[i])
		}
	}
}

// TestFeaturesAreTheSameInParallel: ComputeFeatures splits the bars among
// goroutines; whatever the number of CPUs, every row equals the one the
// bar's formula gives on its own, bit for bit.
func TestFeaturesAreTheSameInParallel(t *testing.T) {
	b, _, err := SyntheticSeries(20_000, 7, 0.35)
	if err != nil {
		t.Fatal(err)
	}
	in := newFeatureInputs(b)
	want := make([]float64, b.Len()*NumFeatures)
	for k := FeatureWarmup; k < b.Len(); k++ {
		in.row(k, want[k*NumFeatures:(k+1)*NumFeatures])
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3, 8} {
		runtime.GOMAXPROCS(procs)
		got, warmup := ComputeFeatures(b)
		if warmup != FeatureWarmup || len(got) != len(want) {
			t.Fatalf("%d CPUs: %d values from bar %d, want %d from %d", procs, len(got), warmup, len(want), FeatureWarmup)
		}
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%d CPUs: bar %d feature %s = %v, alone %v", procs, i/NumFeatures, FeatureNames[i%NumFeatures], got[i], want[i])
			}
		}
	}
}

// TestParallelRangesCoverEachIndexOnce: the pieces are disjoint and cover
// the range, whatever its length against the pieces' least length.
func TestParallelRangesCoverEachIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 5, 2047, 2048, 4096, 4097, 10_000} {
		seen := make([]int32, n)
		parallelRanges(0, n, 2048, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&seen[i], 1)
			}
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n %d: index %d covered %d times", n, i, c)
			}
		}
	}
}

// BenchmarkComputeFeatures: the features of the bundled S&P 500 series
// (53,000 bars), what every run's start prepares; -cpu 1,2,… shows the
// split among CPUs.
func BenchmarkComputeFeatures(b *testing.B) {
	bars, err := prices.Source{}.Bars(context.Background(), "bundled:USA500IDXUSD_H1.csv")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ComputeFeatures(bars)
	}
}
