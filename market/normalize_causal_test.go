package market

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
)

// TestCausalNormalizerMatchesHandWorkedValues: half-life 1 (λ = ½),
// burn-in 2, on x = 1, 2, 4, 0, 3. The statistics before row t weigh row
// t−1 by 1, t−2 by ½, t−3 by ¼ …:
//
//	before row 2: W = 1.5,  m = (½·1 + 2)/1.5 = 5/3, v = (½·4/9 + 1/9)/1.5 = 2/9
//	before row 3: W = 1.75, m = (¼ + 1 + 4)/1.75 = 3, v = (¼·4 + ½·1 + 1)/1.75 = 10/7
//	before row 4: W = 1.875, m = (⅛ + ½ + 2 + 0)/1.875 = 1.4,
//	              v = (⅛·0.16 + ¼·0.36 + ½·6.76 + 1.96)/1.875 = 218/75
//
// so z = 0, 0 (burn-in), (4 − 5/3)/√(2/9) = 7/√2, (0 − 3)/√(10/7) = −3√0.7
// and 1.6·√(75/218). An affine image of the series gives the same z (its
// sign flipped with the scale), a constant 0, a NaN row 0 and no weight,
// an outlier the clip, a dropped feature 0.
func TestCausalNormalizerMatchesHandWorkedValues(t *testing.T) {
	nan := math.NaN()
	cols := [][5]float64{
		{1, 2, 4, 0, 3},
		{97, 94, 88, 100, 91}, // 100 − 3x
		{5, 5, 5, 5, 5},
		{1, 2, 4, nan, 5},
		{1, 2, 1000, 0, 0},
		{1, 2, 4, 0, 3}, // dropped
	}
	z3 := 2 * math.Sqrt(0.7) // (5 − 3)/√(10/7): the NaN row is not in the statistics
	want := [][5]float64{
		{0, 0, 7 / math.Sqrt2, -3 * math.Sqrt(0.7), 1.6 * math.Sqrt(75.0/218)},
		{0, 0, -7 / math.Sqrt2, 3 * math.Sqrt(0.7), -1.6 * math.Sqrt(75.0/218)},
		{0, 0, 0, 0, 0},
		{0, 0, 7 / math.Sqrt2, 0, z3},
		{0, 0, NormClip, math.NaN(), math.NaN()}, // rows 3, 4 not checked
		{0, 0, 0, 0, 0},
	}
	raw := make([]float64, 5*NumFeatures)
	for j, c := range cols {
		for i, x := range c {
			raw[i*NumFeatures+j] = x
		}
	}
	n := Normalizer{Mode: config.NormalizeCausal, HalfLife: 1, BurnIn: 2, Drop: 1 << 5}
	if err := n.Check(); err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, len(raw))
	for i := range dst {
		dst[i] = 99
	}
	n.Apply(raw, dst)
	for j, w := range want {
		for i, z := range w {
			if math.IsNaN(z) {
				continue
			}
			if got := dst[i*NumFeatures+j]; math.Abs(float64(got)-z) > 1e-6*max(1, math.Abs(z)) {
				t.Errorf("column %d row %d: z = %v, want %v", j, i, got, z)
			}
		}
	}
	for i := range 5 {
		for j := len(cols); j < NumFeatures; j++ {
			if dst[i*NumFeatures+j] != 0 {
				t.Fatalf("all-zero column %d row %d: z = %v, want 0", j, i, dst[i*NumFeatures+j])
			}
		}
	}
}

// TestCausalNormalizerMatchesTheWeightedSums checks the recursion against
// the definition, summed afresh at every row in float64: the weight of row
// i before row t is ½^((t−1−i)/h), m and v the weighted mean and
// population variance, z = clip((x_t − m)/max(√v, floor)).
func TestCausalNormalizerMatchesTheWeightedSums(t *testing.T) {
	const rows, h, burnIn = 300, 7, 20
	raw := randomRaw(rows, 3)
	n := Normalizer{Mode: config.NormalizeCausal, HalfLife: h, BurnIn: burnIn}
	dst := make([]float32, len(raw))
	n.Apply(raw, dst)
	for tt := range rows {
		for j := range NumFeatures {
			got := dst[tt*NumFeatures+j]
			if tt < burnIn {
				if got != 0 {
					t.Fatalf("row %d in the burn-in: feature %d = %v, want 0", tt, j, got)
				}
				continue
			}
			var sw, sx float64
			for i := range tt {
				w := math.Pow(0.5, float64(tt-1-i)/h)
				sw += w
				sx += w * raw[i*NumFeatures+j]
			}
			m := sx / sw
			var ss float64
			for i := range tt {
				d := raw[i*NumFeatures+j] - m
				ss += math.Pow(0.5, float64(tt-1-i)/h) * d * d
			}
			z := max(-NormClip, min(NormClip, (raw[tt*NumFeatures+j]-m)/max(math.Sqrt(ss/sw), NormStdFloor)))
			if math.Abs(float64(got)-z) > 1e-6*max(1, math.Abs(z)) {
				t.Fatalf("row %d feature %d: z = %v, want %v", tt, j, got, z)
			}
		}
	}
}

// causalConfig is a small synthetic run with causal normalisation whose
// training, validation and test ranges all lie after the burn-in.
func causalConfig() config.RunConfig {
	cfg := cfgFor(prices.SyntheticPath)
	cfg.Data.SyntheticBars = 3000
	cfg.Data.Normalize, cfg.Data.NormalizeHalfLife = config.NormalizeCausal, 300
	cfg.Env.EpisodeBars = 64
	return cfg
}

// preparedSynthetic is the synthetic series of cfg and its dataset.
func preparedSynthetic(t *testing.T, cfg config.RunConfig) (*prices.Bars, *Dataset) {
	t.Helper()
	b, _, err := SyntheticSeries(cfg.Data.SyntheticBars, cfg.Seed, cfg.Data.SyntheticPhi)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := prepare(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, ds
}

// perturbAfter returns a copy of b whose bars after cut have other
// prices, volumes and times (still valid bars).
func perturbAfter(b *prices.Bars, cut int, rng *rand.Rand) *prices.Bars {
	p := cloneBars(b)
	for i := cut + 1; i < p.Len(); i++ {
		f := math.Exp(0.05 * rng.NormFloat64())
		p.Open[i] *= f * (1 + 0.01*rng.Float64())
		p.Close[i] *= f / (1 + 0.01*rng.Float64())
		p.High[i] = max(p.Open[i], p.Close[i]) * (1 + 0.02*rng.Float64())
		p.Low[i] = min(p.Open[i], p.Close[i]) / (1 + 0.02*rng.Float64())
		p.Volume[i] = 1000 * rng.Float64()
		p.Time[i] = p.Time[i].Add(time.Duration(rng.IntN(3600)) * time.Second)
	}
	return p
}

// firstChange is the first index below upTo where a and b differ in their
// bits, or −1.
func firstChange(a, b []float32, upTo int) int {
	for i := range min(upTo, len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestCausalFeaturesHaveNoLookAhead is the property on the
// normalised features a policy sees (Dataset.Features): perturb every bar
// after t (OHLCV and the time), prepare again, and every feature at bars
// ≤ t is the same bit for bit, for t in the burn-in, at its end, inside the
// training range, at its last bar, in validation and in the test range;
// with data.mirror also on the joined training set up to the join. Later
// features do change, so the perturbation is felt.
func TestCausalFeaturesHaveNoLookAhead(t *testing.T) {
	for _, mirror := range []bool{false, true} {
		cfg := causalConfig()
		cfg.Data.Mirror = mirror
		b, base := preparedSynthetic(t, cfg)
		if w := FeatureWarmup + CausalBurnIn; base.Warmup != w || base.Train.From != w || !base.Norm.Causal() || base.Norm.HalfLife != 300 {
			t.Fatalf("warmup %d, training %s, normaliser %+v: want warmup and training from %d, causal, half-life 300",
				base.Warmup, base.Train, base.Norm.Mode, w)
		}
		trainMode := cfg
		trainMode.Data.Normalize = config.NormalizeTrain
		plain, err := prepare(b, trainMode)
		if err != nil {
			t.Fatal(err)
		}
		if base.Train.To != plain.Train.To || base.Valid != plain.Valid || base.Test != plain.Test {
			t.Fatalf("causal ranges %s %s %s; want train mode's %s %s %s but for training's start",
				base.Train, base.Valid, base.Test, plain.Train, plain.Valid, plain.Test)
		}
		tr := base.Train
		rng := rand.New(rand.NewPCG(5, 6))
		for _, cut := range []int{FeatureWarmup + 100, base.Warmup - 1, base.Warmup, tr.From + 300, (tr.From + tr.To) / 2, tr.To - 1,
			base.Valid.From + 50, base.Test.From + 10, b.Len() - 2} {
			p := perturbAfter(b, cut, rng)
			got, err := prepare(p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got.Train != tr || got.Valid != base.Valid || got.Test != base.Test {
				t.Fatalf("cut %d: ranges moved", cut)
			}
			upTo := (cut + 1) * NumFeatures
			if i := firstChange(base.Features, got.Features, upTo); i >= 0 {
				t.Fatalf("mirror %v, bars after %d perturbed: normalised %s at bar %d changed from %v to %v",
					mirror, cut, FeatureNames[i%NumFeatures], i/NumFeatures, base.Features[i], got.Features[i])
			}
			if firstChange(base.Features[upTo:], got.Features[upTo:], len(got.Features)) < 0 {
				t.Errorf("mirror %v: perturbing bars after %d changed no later feature", mirror, cut)
			}
			if mirror && cut < tr.To {
				bt, gt := base.TrainingSet(), got.TrainingSet()
				if i := firstChange(bt.Features, gt.Features, upTo); i >= 0 {
					t.Fatalf("mirrored training set, bars after %d perturbed: %s at bar %d changed", cut, FeatureNames[i%NumFeatures], i/NumFeatures)
				}
				if firstChange(bt.Features, base.Features, tr.To*NumFeatures) >= 0 {
					t.Fatal("mirrored training set's rows before the join differ from the dataset's")
				}
			}
		}
	}
}

// TestTrainNormalizationLooksAhead: the same perturbation under
// data.normalize "train" moves features at bars ≤ t inside the training
// range (its statistics are of the whole range), so the property above is
// one that a normaliser can fail; after the training range it holds.
func TestTrainNormalizationLooksAhead(t *testing.T) {
	cfg := causalConfig()
	cfg.Data.Normalize = config.NormalizeTrain
	b, base := preparedSynthetic(t, cfg)
	if base.Warmup != FeatureWarmup || base.Norm.Causal() {
		t.Fatalf("train mode: warmup %d, mode %q; want %d and \"\"", base.Warmup, base.Norm.Mode, FeatureWarmup)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, cut := range []int{base.Train.From + 100, (base.Train.From + base.Train.To) / 2, base.Train.To - 2} {
		got, err := prepare(perturbAfter(b, cut, rng), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if firstChange(base.Features, got.Features, (cut+1)*NumFeatures) < 0 {
			t.Errorf("train mode, bars after %d (inside training %s) perturbed: no feature at or before it changed; want the look-ahead shown", cut, base.Train)
		}
	}
	cut := base.Train.To + 10
	got, err := prepare(perturbAfter(b, cut, rng), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstChange(base.Features, got.Features, (cut+1)*NumFeatures); i >= 0 {
		t.Errorf("train mode, bars after %d (past training) perturbed: feature at bar %d changed", cut, i/NumFeatures)
	}
}

// TestCausalNormalizerReproducesOnOtherBars: the normaliser a causal run
// stores (JSON, as in a checkpoint) scales bars given to PrepareWith by
// their own past: on the run's own bars it gives the run's features bit
// for bit, and Valid starts after the burn-in. A normaliser stored
// without a mode (every older checkpoint) is the train-mode one.
func TestCausalNormalizerReproducesOnOtherBars(t *testing.T) {
	cfg := causalConfig()
	b, ds := preparedSynthetic(t, cfg)
	raw, err := json.Marshal(ds.Norm)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(raw); !strings.Contains(s, `"mode":"causal"`) || !strings.Contains(s, `"half_life":300`) || !strings.Contains(s, `"burn_in":500`) {
		t.Fatalf("causal normaliser JSON %s: want mode, half_life and burn_in", s[len(s)-80:])
	}
	var back Normalizer
	if err := json.Unmarshal(raw, &back); err != nil || back != ds.Norm {
		t.Fatalf("JSON round trip: %v", err)
	}
	other, err := PrepareWith(b, back, ds.Instrument)
	if err != nil {
		t.Fatal(err)
	}
	if other.Warmup != ds.Warmup || other.Valid != (Range{ds.Warmup, b.Len()}) {
		t.Errorf("PrepareWith: warmup %d, valid %s; want %d and [%d, %d)", other.Warmup, other.Valid, ds.Warmup, ds.Warmup, b.Len())
	}
	if i := firstChange(ds.Features, other.Features, len(ds.Features)); i >= 0 || len(other.Features) != len(ds.Features) {
		t.Errorf("PrepareWith with the stored causal normaliser differs from Prepare at bar %d", i/NumFeatures)
	}
	// Other bars: the same rule on their own past, not the run's statistics.
	short := b.Slice(1000, b.Len())
	on, err := PrepareWith(short, back, ds.Instrument)
	if err != nil {
		t.Fatal(err)
	}
	sraw, _ := ComputeFeatures(short)
	want := make([]float32, len(sraw))
	back.Apply(sraw[FeatureWarmup*NumFeatures:], want[FeatureWarmup*NumFeatures:])
	if firstChange(on.Features, want, len(want)) >= 0 {
		t.Error("PrepareWith on other bars is not the causal rule over their own features")
	}

	var old Normalizer
	if err := json.Unmarshal([]byte(`{"mean":[1],"std":[2],"drop":3}`), &old); err != nil || old.Causal() || old.Check() != nil || old.BurnIn != 0 {
		t.Errorf("a normaliser stored without a mode: %+v (%v); want the train mode", old.Mode, err)
	}
	for _, bad := range []Normalizer{
		{Mode: "rolling"},
		{Mode: config.NormalizeCausal, HalfLife: 0, BurnIn: 500},
		{Mode: config.NormalizeCausal, HalfLife: 10, BurnIn: 0},
		{HalfLife: 10},
		{Drop: 1 << NumFeatures},
	} {
		if bad.Check() == nil {
			t.Errorf("Check accepted %+v", bad)
		} else if _, err := PrepareWith(b, bad, ds.Instrument); err == nil {
			t.Errorf("PrepareWith accepted the normaliser %+v", bad)
		}
	}
}

// TestCausalNeedsBarsForItsBurnIn: a series long enough for train mode but
// not for the burn-in as well is refused, naming the burn-in; so is a
// split whose training range the burn-in leaves too short, naming
// data.normalize.
func TestCausalNeedsBarsForItsBurnIn(t *testing.T) {
	cfg := causalConfig()
	b, _, err := SyntheticSeries(FeatureWarmup+cfg.Env.EpisodeBars+200, cfg.Seed, cfg.Data.SyntheticPhi)
	if err != nil {
		t.Fatal(err)
	}
	train := cfg
	train.Data.Normalize = config.NormalizeTrain
	if _, err := prepare(b, train); err != nil {
		t.Fatalf("train mode on %d bars: %v", b.Len(), err)
	}
	_, err = prepare(b, cfg)
	if err == nil || !strings.Contains(err.Error(), "burn-in 500") {
		t.Errorf("causal mode on %d bars: %v; want an error naming the burn-in", b.Len(), err)
	}
	short := causalConfig()
	short.Data.TrainFraction = 0.2 // training [199, 759): 60 bars after the burn-in
	sb, _, err := SyntheticSeries(short.Data.SyntheticBars, short.Seed, short.Data.SyntheticPhi)
	if err != nil {
		t.Fatal(err)
	}
	_, err = prepare(sb, short)
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "data.normalize" || !strings.Contains(err.Error(), "training range [699, 759) with 60 bars") {
		t.Errorf("training cut to 60 bars by the burn-in: %v; want a data.normalize error saying so", err)
	}
}
