package market

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/dqnflow/dqnflow/prices"
)

func mirroredSPX(t *testing.T) (plain, mirrored *Dataset) {
	t.Helper()
	cfg := cfgFor(spxPath)
	plain, err := Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data.Mirror = true
	mirrored, err = Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return plain, mirrored
}

// The copy reflects every price of the training range in log space about
// the geometric mean of its first and last close, keeps volume, and joins
// the original where its training range ends; its times keep hour and
// weekday and come after the original's.
func TestMirrorReflectsTheTrainingRangesPrices(t *testing.T) {
	plain, ds := mirroredSPX(t)
	ts := ds.TrainingSet()
	b, m, r := plain.Bars, ts.Bars, plain.Train
	if !ds.Mirrored() || plain.Mirrored() || plain.TrainingSet() != plain {
		t.Fatal("Mirrored/TrainingSet do not follow data.mirror")
	}
	if m.Len() != r.To+r.Len() || ts.Train != (Range{r.From, r.To + r.Len()}) {
		t.Fatalf("joined set has %d bars and training range %s; want %d and [%d, %d)", m.Len(), ts.Train, r.To+r.Len(), r.From, r.To+r.Len())
	}
	k := b.Close[r.To-1] * b.Close[r.From]
	for i := range r.Len() {
		s, j := r.From+i, r.To+i
		for _, c := range []struct {
			name       string
			got, price float64
		}{{"open", m.Open[j], b.Open[s]}, {"high", m.High[j], b.Low[s]}, {"low", m.Low[j], b.High[s]}, {"close", m.Close[j], b.Close[s]}} {
			if rel := math.Abs(c.got*c.price/k - 1); rel > 1e-14 {
				t.Fatalf("copy bar %d %s = %v: times the original's %v gives %v, want K = %v", i, c.name, c.got, c.price, c.got*c.price, k)
			}
		}
		if m.Volume[j] != b.Volume[s] {
			t.Fatalf("copy bar %d volume %v, want %v", i, m.Volume[j], b.Volume[s])
		}
		if m.High[j] < max(m.Open[j], m.Close[j]) || m.Low[j] > min(m.Open[j], m.Close[j]) {
			t.Fatalf("copy bar %d is not a bar: O %v H %v L %v C %v", i, m.Open[j], m.High[j], m.Low[j], m.Close[j])
		}
		if m.Time[j].Weekday() != b.Time[s].Weekday() || m.Time[j].Hour() != b.Time[s].Hour() || !m.Time[j].After(m.Time[j-1]) {
			t.Fatalf("copy bar %d at %v (original %v, previous %v): want the same weekday and hour, later than the previous bar", i, m.Time[j], b.Time[s], m.Time[j-1])
		}
	}
	if rel := math.Abs(m.Close[r.To]/b.Close[r.To-1] - 1); rel > 1e-14 {
		t.Errorf("the copy starts at %v, want the last training close %v", m.Close[r.To], b.Close[r.To-1])
	}
}

// Every log return of the copy is the original's negated, so ret_1 and
// the other return features change sign; features of bars before the join
// are the original's, since features only look back.
func TestMirrorNegatesReturnsAndLeavesEarlierBarsAlone(t *testing.T) {
	plain, ds := mirroredSPX(t)
	ts := ds.TrainingSet()
	r := plain.Train
	raw, _ := ComputeFeatures(plain.Bars)
	mraw, _ := ComputeFeatures(ts.Bars)
	if !reflect.DeepEqual(raw[:r.To*NumFeatures], mraw[:r.To*NumFeatures]) {
		t.Fatal("features before the join differ from the original's")
	}
	for i := 1; i < r.Len(); i++ {
		s, j := r.From+i, r.To+i
		if got, want := mraw[j*NumFeatures], -raw[s*NumFeatures]; math.Abs(got-want) > 1e-12 {
			t.Fatalf("ret_1 of copy bar %d = %v, want the original's negated %v", i, got, want)
		}
	}
	// The joined training range has (almost) no drift: the copy undoes the
	// original's log return, except the one bar across the join.
	var sum float64
	for j := ts.Train.From + 1; j < ts.Train.To; j++ {
		sum += mraw[j*NumFeatures]
	}
	if math.Abs(sum) > 1e-9 {
		t.Errorf("joined training range sums to log return %v, want 0", sum)
	}
}

// Validation, test, instrument and the rows the backtests read are the
// data's own; only the normaliser, fitted on the joined range, changes.
func TestMirrorChangesOnlyTrainingAndTheNormaliser(t *testing.T) {
	plain, ds := mirroredSPX(t)
	ts := ds.TrainingSet()
	if !reflect.DeepEqual(ds.Bars, plain.Bars) || ds.Train != plain.Train || ds.Valid != plain.Valid || ds.Test != plain.Test {
		t.Fatal("data.mirror changed the dataset's bars or ranges")
	}
	if ds.Instrument != plain.Instrument || ts.Instrument != ds.Instrument || ts.BarsPerYear != ds.BarsPerYear {
		t.Errorf("instrument %+v / training set %+v, want the data's %+v", ds.Instrument, ts.Instrument, plain.Instrument)
	}
	mraw, _ := ComputeFeatures(ts.Bars)
	if want := fitted(mraw, ts.Train, ds.Norm.Drop); ds.Norm != want || ts.Norm != want {
		t.Error("normaliser not fitted on the joined training range")
	}
	if ds.Norm == plain.Norm {
		t.Error("the joined range left the normaliser unchanged")
	}
	// The joined range's mean return is about zero: the drift is gone
	// (but for the return into its first bar).
	if m, s := ds.Norm.Mean[0], ds.Norm.Std[0]; math.Abs(m) > 1e-3*s {
		t.Errorf("ret_1 mean %v over the joined range (std %v), want about 0", m, s)
	}
	raw, _ := ComputeFeatures(ds.Bars)
	for _, i := range []int{ds.Valid.From, ds.Valid.To - 1, ds.Test.From, ds.Test.To - 1} {
		for j := range NumFeatures {
			z := wantZ(ds.Norm, raw[i*NumFeatures+j], j)
			if ds.Features[i*NumFeatures+j] != float32(z) {
				t.Fatalf("feature %s at bar %d = %v, want %v", FeatureNames[j], i, ds.Features[i*NumFeatures+j], z)
			}
		}
	}
}
