package market

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
)

func randomRaw(rows int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0))
	raw := make([]float64, rows*NumFeatures)
	for i := range raw {
		raw[i] = float64(i%NumFeatures) + rng.NormFloat64()*float64(1+i%7)
	}
	return raw
}

// TestFitNormalizerUsesOnlyTheRange: rows outside the range (validation)
// do not move the statistics, which match a one-pass float64 reference.
func TestFitNormalizerUsesOnlyTheRange(t *testing.T) {
	raw := randomRaw(100, 1)
	r := Range{From: 20, To: 60}
	n := FitNormalizer(raw, r)

	other := append([]float64(nil), raw...)
	for i := 0; i < len(other); i++ {
		if row := i / NumFeatures; row < r.From || row >= r.To {
			other[i] = 1e6 * float64(i%3-1)
		}
	}
	if FitNormalizer(other, r) != n {
		t.Fatal("changing rows outside the range changed the normaliser")
	}
	for j := 0; j < NumFeatures; j++ {
		var s, ss float64
		for i := r.From; i < r.To; i++ {
			x := raw[i*NumFeatures+j]
			s += x
			ss += x * x
		}
		k := float64(r.Len())
		mean := s / k
		sd := math.Sqrt(ss/k - mean*mean)
		if math.Abs(n.Mean[j]-mean) > 1e-12*max(1, math.Abs(mean)) || math.Abs(n.Std[j]-sd) > 1e-9*sd {
			t.Errorf("feature %d: mean, std = %v, %v; want %v, %v", j, n.Mean[j], n.Std[j], mean, sd)
		}
	}
}

func TestNormalizerEdgeCases(t *testing.T) {
	raw := make([]float64, 10*NumFeatures)
	for i := range raw {
		raw[i] = 3 // every feature constant
	}
	n := FitNormalizer(raw, Range{0, 10})
	if n.Mean[5] != 3 || n.Std[5] != NormStdFloor {
		t.Errorf("constant feature: mean %v std %v, want 3 and the floor %v", n.Mean[5], n.Std[5], NormStdFloor)
	}
	dst := make([]float32, len(raw))
	n.Apply(raw, dst)
	for i, v := range dst {
		if v != 0 {
			t.Fatalf("constant feature normalised to %v at %d, want 0", v, i)
		}
	}
	for _, r := range []Range{{5, 5}, {8, 3}, {20, 30}} {
		id := FitNormalizer(raw, r)
		if id.Mean[0] != 0 || id.Std[0] != 1 || id.Std[NumFeatures-1] != 1 {
			t.Errorf("empty range %v: mean %v std %v, want the identity", r, id.Mean[0], id.Std[0])
		}
	}
	// A range reaching past the data is clipped to it.
	if got := FitNormalizer(raw, Range{-4, 1000}); got != n {
		t.Error("range beyond the rows not clipped to them")
	}
}

// TestNormalizerApply checks hand-worked values: mean 1, std 2.
func TestNormalizerApply(t *testing.T) {
	var n Normalizer
	for j := range n.Mean {
		n.Mean[j], n.Std[j] = 1, 2
	}
	raw := make([]float64, 2*NumFeatures)
	raw[0], raw[1], raw[2], raw[3], raw[4] = 5, 100, -100, math.NaN(), 1.5
	raw[NumFeatures] = 21 // exactly the clip bound
	dst := make([]float32, 2*NumFeatures+3)
	for i := range dst {
		dst[i] = 99
	}
	n.Apply(raw, dst)
	want := []float32{2, 10, -10, 0, 0.25}
	for i, w := range want {
		if dst[i] != w {
			t.Errorf("dst[%d] = %v, want %v", i, dst[i], w)
		}
	}
	if dst[NumFeatures] != 10 || dst[5] != -0.5 {
		t.Errorf("dst = %v, %v; want 10, -0.5", dst[NumFeatures], dst[5])
	}
	if dst[2*NumFeatures] != 99 {
		t.Error("Apply wrote past the whole rows of raw")
	}
}

func TestNormalizerJSONRoundTrip(t *testing.T) {
	n := FitNormalizer(randomRaw(30, 2), Range{0, 30})
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil || keys["mean"] == nil || keys["std"] == nil {
		t.Fatalf("JSON %s: want keys mean and std (%v)", b[:40], err)
	}
	var back Normalizer
	if err := json.Unmarshal(b, &back); err != nil || back != n {
		t.Errorf("round trip changed the normaliser (%v)", err)
	}
}

// Dropped features are 0 in every row, whatever their value; the others
// are normalised as before. Names resolve to bits, and a bad list is an
// error naming the position.
func TestDroppedFeaturesAreZero(t *testing.T) {
	plain, ds := func() (*Dataset, *Dataset) {
		cfg := cfgFor(btcPath)
		cfg.Data.DropFeatures = "" // every feature
		a, err := Prepare(context.Background(), prices.Source{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Data.DropFeatures = " hour_sin, hour_cos,dow_sin,dow_cos,volume_z_24 "
		b, err := Prepare(context.Background(), prices.Source{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}()
	dropped := map[int]bool{45: true, 46: true, 47: true, 48: true, 49: true}
	if want := uint64(1<<45 | 1<<46 | 1<<47 | 1<<48 | 1<<49); ds.Norm.Drop != want {
		t.Fatalf("Drop = %#x, want %#x", ds.Norm.Drop, want)
	}
	for i := ds.Warmup; i < ds.Bars.Len(); i++ {
		for j := range NumFeatures {
			got, was := ds.Features[i*NumFeatures+j], plain.Features[i*NumFeatures+j]
			if dropped[j] && got != 0 || !dropped[j] && got != was {
				t.Fatalf("bar %d feature %s = %v (without drop_features %v)", i, FeatureNames[j], got, was)
			}
		}
	}
	// A checkpoint's policy on other bars: the stored normaliser drops them too.
	var back Normalizer
	if raw, err := json.Marshal(ds.Norm); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(raw, &back); err != nil || back != ds.Norm {
		t.Fatalf("normaliser JSON round trip: %v, Drop %#x, want %#x", err, back.Drop, ds.Norm.Drop)
	}
	other, err := PrepareWith(plain.Bars, back, ds.Instrument)
	if err != nil {
		t.Fatal(err)
	}
	for i := other.Warmup; i < other.Bars.Len(); i += 7 {
		for j := range dropped {
			if other.Features[i*NumFeatures+j] != 0 {
				t.Fatalf("PrepareWith: bar %d feature %s = %v, want 0", i, FeatureNames[j], other.Features[i*NumFeatures+j])
			}
		}
	}
	for _, bad := range []struct{ list, want string }{
		{"hour_sin,hour", `name 2, "hour", is not a feature`},
		{"rsi_7,rsi_7", `name 2, "rsi_7", is named twice`},
		{"rsi_7,,rsi_14", `name 2, "", is not a feature`},
		{strings.Join(FeatureNames[:], ","), "drops all 56 features"},
	} {
		cfg := cfgFor(btcPath)
		cfg.Data.DropFeatures = bad.list
		_, err := Prepare(context.Background(), prices.Source{}, cfg)
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Field != "data.drop_features" || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("drop_features %q: %v; want a data.drop_features error containing %q", bad.list, err, bad.want)
		}
	}
}
