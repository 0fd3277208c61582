package market

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/prices"
)

const (
	spxPath = "bundled:USA500IDXUSD_H1.csv"
	btcPath = "bundled:bitcoin_2024.csv"
)

func cfgFor(path string) config.RunConfig {
	c := config.Defaults()
	c.Data.Path = path
	return c
}

// fitted is FitNormalizer with the given dropped features.
func fitted(raw []float64, r Range, drop uint64) Normalizer {
	n := FitNormalizer(raw, r)
	n.Drop = drop
	return n
}

// wantZ is feature j's normalised value x under n, by the formula.
func wantZ(n Normalizer, x float64, j int) float64 {
	if n.Drop&(1<<j) != 0 {
		return 0
	}
	return max(-NormClip, min(NormClip, (x-n.Mean[j])/n.Std[j]))
}

// checkDataset checks what holds for every prepared Dataset: the shapes,
// zero rows before the warmup, features equal to the normaliser applied to
// ComputeFeatures, ATR(14), and the resolved instrument.
func checkDataset(t *testing.T, ds *Dataset, env config.EnvConfig) {
	t.Helper()
	n := ds.Bars.Len()
	if len(ds.Features) != n*NumFeatures || len(ds.ATR) != n || ds.Warmup != FeatureWarmup {
		t.Fatalf("len(Features) %d, len(ATR) %d, Warmup %d for %d bars", len(ds.Features), len(ds.ATR), ds.Warmup, n)
	}
	for i := 0; i < ds.Warmup*NumFeatures; i++ {
		if ds.Features[i] != 0 {
			t.Fatalf("feature %d before the warmup = %v", i, ds.Features[i])
		}
	}
	raw, _ := ComputeFeatures(ds.Bars)
	if ds.Train.Len() > 0 && ds.Norm != fitted(raw, ds.Train, ds.Norm.Drop) {
		t.Error("normaliser not fitted on the training range")
	}
	for i := ds.Warmup * NumFeatures; i < len(raw); i += 97 {
		j := i % NumFeatures
		if z := wantZ(ds.Norm, raw[i], j); ds.Features[i] != float32(z) {
			t.Fatalf("feature %s at bar %d = %v, want %v", FeatureNames[j], i/NumFeatures, ds.Features[i], float32(z))
		}
	}
	if !reflect.DeepEqual(ds.ATR, ATR(ds.Bars, 14)) {
		t.Error("Dataset.ATR is not ATR(bars, 14)")
	}
	if ds.Train.Len() > 0 && env.PointValue == 0 {
		ref := ds.Bars.Close[ds.Train.To-1]
		if want := env.InitialCapital / (float64(env.MaxContracts) * ref); math.Abs(ds.Instrument.PointValue-want) > 1e-12*want {
			t.Errorf("point value %v, want %v = capital/(contracts·close at the last training bar)", ds.Instrument.PointValue, want)
		}
	}
	if ds.BarsPerYear != ds.Bars.BarsPerYear() {
		t.Errorf("BarsPerYear %v, want %v", ds.BarsPerYear, ds.Bars.BarsPerYear())
	}
}

// TestPrepareSplitsByFraction: with no times, the bars after the warmup
// split at train_fraction, the last test_fraction are held out as the test
// range, and the three ranges tile the data in time order.
func TestPrepareSplitsByFraction(t *testing.T) {
	for _, path := range []string{spxPath, btcPath} {
		t.Run(path, func(t *testing.T) {
			cfg := cfgFor(path)
			ds, err := Prepare(context.Background(), prices.Source{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			n := ds.Bars.Len()
			usable := float64(n - FeatureWarmup)
			cut := FeatureWarmup + int(0.7*usable)
			test := n - int(0.15*usable)
			if ds.Train != (Range{FeatureWarmup, cut}) || ds.Valid != (Range{cut, test}) || ds.Test != (Range{test, n}) {
				t.Errorf("train %v valid %v test %v, want [%d, %d), [%d, %d) and [%d, %d)", ds.Train, ds.Valid, ds.Test, FeatureWarmup, cut, cut, test, test, n)
			}
			if want := AutoInstrument(path); ds.Instrument.Name != want || ds.Instrument.MaxContracts != 4 {
				t.Errorf("instrument %+v, want the file's documented %s with the env's contracts", ds.Instrument, want)
			}
			cfg.Data.TestFraction = 0
			ds, err = Prepare(context.Background(), prices.Source{}, cfg)
			if err != nil || ds.Test.Len() != 0 || ds.Valid.To != n {
				t.Errorf("test_fraction 0: test %v, valid %v, %v; want no test range and validation to the end", ds.Test, ds.Valid, err)
			}
			checkDataset(t, ds, cfg.Env)
		})
	}
}

// TestPrepareSplitsByTime checks time ranges: ends exclusive, missing ends
// defaulted, training clamped to the warmup.
func TestPrepareSplitsByTime(t *testing.T) {
	at := func(b *prices.Bars, s string) int { tm, _ := config.ParseTime(s); return b.Index(tm) }
	cases := []struct {
		name                 string
		trainFrom, trainTo   string
		validFrom, validTo   string
		wantTrain, wantValid func(b *prices.Bars) Range
	}{
		{"all four", "2024-02-01", "2024-06-01 00:00", "2024-06-01", "2024-07-15T12:00:00Z",
			func(b *prices.Bars) Range { return Range{at(b, "2024-02-01"), at(b, "2024-06-01")} },
			func(b *prices.Bars) Range { return Range{at(b, "2024-06-01"), at(b, "2024-07-15 12:00")} }},
		{"validation after a gap", "", "2024-05-01", "2024-06-01", "",
			func(b *prices.Bars) Range { return Range{FeatureWarmup, at(b, "2024-05-01")} },
			func(b *prices.Bars) Range { return Range{at(b, "2024-06-01"), b.Len()} }},
		{"only valid_from", "", "", "2024-08-01", "",
			func(b *prices.Bars) Range { return Range{FeatureWarmup, at(b, "2024-08-01")} },
			func(b *prices.Bars) Range { return Range{at(b, "2024-08-01"), b.Len()} }},
		{"only train_to", "", "2024-08-01", "", "",
			func(b *prices.Bars) Range { return Range{FeatureWarmup, at(b, "2024-08-01")} },
			func(b *prices.Bars) Range { return Range{at(b, "2024-08-01"), b.Len()} }},
		{"train_from before the data", "2020-01-01", "2024-08-01", "", "2024-09-01",
			func(b *prices.Bars) Range { return Range{FeatureWarmup, at(b, "2024-08-01")} },
			func(b *prices.Bars) Range { return Range{at(b, "2024-08-01"), at(b, "2024-09-01")} }},
		{"validation before training", "2024-04-01", "", "2024-01-20", "2024-03-01",
			func(b *prices.Bars) Range { return Range{at(b, "2024-04-01"), b.Len()} },
			func(b *prices.Bars) Range { return Range{at(b, "2024-01-20"), at(b, "2024-03-01")} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfgFor(btcPath)
			cfg.Data.TrainFrom, cfg.Data.TrainTo, cfg.Data.ValidFrom, cfg.Data.ValidTo = c.trainFrom, c.trainTo, c.validFrom, c.validTo
			ds, err := Prepare(context.Background(), prices.Source{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tr, va := c.wantTrain(ds.Bars), c.wantValid(ds.Bars); ds.Train != tr || ds.Valid != va {
				t.Errorf("train %v valid %v, want %v %v", ds.Train, ds.Valid, tr, va)
			}
			if c.trainTo != "" {
				end, _ := config.ParseTime(c.trainTo)
				if !ds.Bars.Time[ds.Train.To-1].Before(end) || ds.Bars.Time[ds.Train.To].Before(end) {
					t.Errorf("train_to %s is not the exclusive end of %v", c.trainTo, ds.Train)
				}
			}
			checkDataset(t, ds, cfg.Env)
		})
	}
	// The same split on the S&P file, whose bars have weekend gaps.
	cfg := cfgFor(spxPath)
	cfg.Data.TrainFrom, cfg.Data.TrainTo, cfg.Data.ValidFrom, cfg.Data.ValidTo = "2015-01-01", "2020-01-01", "2020-01-01", "2021-01-01"
	ds, err := Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := ds.Bars
	if got := b.Time[ds.Train.From]; got.Year() != 2015 || got.Month() != time.January || !b.Time[ds.Train.From-1].Before(time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("training starts at %v, want the first bar of 2015", got)
	}
	if ds.Valid.From != ds.Train.To || b.Time[ds.Valid.To-1].Year() != 2020 || b.Time[ds.Valid.To].Year() != 2021 {
		t.Errorf("validation %v = %v to %v, want the bars of 2020", ds.Valid, b.Time[ds.Valid.From], b.Time[ds.Valid.To-1])
	}
	checkDataset(t, ds, cfg.Env)
}

func TestPrepareSynthetic(t *testing.T) {
	cfg := cfgFor(prices.SyntheticPath)
	cfg.Data.SyntheticBars, cfg.Seed = 3000, 9
	cfg.Env.PointValue = 50
	ds, err := Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := Synthetic(3000, 9)
	if !reflect.DeepEqual(ds.Bars, b) {
		t.Error("Prepare(synthetic) bars differ from Synthetic(synthetic_bars, seed)")
	}
	if ds.Instrument.PointValue != 50 {
		t.Errorf("explicit point value became %v", ds.Instrument.PointValue)
	}
	checkDataset(t, ds, cfg.Env)
}

// TestPrepareRejectsBadSplits: each bad split is a *config.FieldError that
// names the field to change.
func TestPrepareRejectsBadSplits(t *testing.T) {
	dir := t.TempDir()
	roots, err := files.NewRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := prices.Source{Roots: roots}
	short := filepath.Join(dir, "short.csv")
	var sb strings.Builder
	sb.WriteString("time,open,high,low,close\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&sb, "%s,10,11,9,10\n", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Hour).Format(time.DateTime))
	}
	if err := os.WriteFile(short, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		edit  func(c *config.DataConfig)
		field string
		text  string
	}{
		{"overlap", func(c *config.DataConfig) { c.TrainTo, c.ValidFrom = "2024-06-01", "2024-05-01" }, "data.valid_from", "overlaps"},
		{"empty training", func(c *config.DataConfig) { c.TrainFrom = "2025-01-01" }, "data.train_from", "holds 0 bars"},
		{"training shorter than an episode", func(c *config.DataConfig) { c.TrainFrom, c.TrainTo = "2024-03-01", "2024-03-05" }, "data.train_to", "holds 96 bars"},
		{"training ends before it starts", func(c *config.DataConfig) { c.TrainFrom, c.TrainTo = "2024-05-01", "2024-03-01" }, "data.train_to", "holds 0 bars"},
		{"training before the warmup", func(c *config.DataConfig) { c.TrainTo = "2024-01-05" }, "data.train_to", "holds 0 bars"},
		{"empty validation", func(c *config.DataConfig) { c.ValidFrom = "2025-01-01" }, "data.valid_from", "holds 0 bars"},
		{"validation ends before it starts", func(c *config.DataConfig) { c.ValidFrom, c.ValidTo = "2024-08-01", "2024-07-01" }, "data.valid_to", "needs at least 2"},
		{"bad time", func(c *config.DataConfig) { c.TrainFrom = "yesterday" }, "data.train_from", "RFC 3339"},
		{"fraction leaves training short", func(c *config.DataConfig) { c.TrainFraction = 0.05 }, "data.train_fraction", "need ≥ env.episode_bars+2 = 514"},
		{"fraction leaves no validation", func(c *config.DataConfig) { c.TrainFraction, c.TestFraction = 0.9999, 0 }, "data.train_fraction", "(1 bars, need ≥ 2)"},
		{"test overlaps validation", func(c *config.DataConfig) {
			c.ValidFrom, c.ValidTo, c.TestFrom = "2024-07-01", "2024-08-01", "2024-07-15"
		}, "data.test_from", "overlaps the validation range"},
		{"test range too short", func(c *config.DataConfig) {
			c.ValidFrom, c.TestFrom, c.TestTo = "2024-07-01", "2024-08-01", "2024-08-01"
		}, "data.test_to", "needs at least 2"},
		{"synthetic series too short", func(c *config.DataConfig) { c.Path, c.SyntheticBars = prices.SyntheticPath, 600 }, "data.synthetic_bars", "holds 600 bars"},
		{"file too short", func(c *config.DataConfig) { c.Path = short }, "data.path", "holds 300 bars"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfgFor(btcPath)
			c.edit(&cfg.Data)
			_, err := Prepare(context.Background(), src, cfg)
			var fe *config.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("err = %v, want a *config.FieldError", err)
			}
			if fe.Field != c.field || !strings.Contains(fe.Allowed, c.text) {
				t.Errorf("got %q, want field %s and a message containing %q", err, c.field, c.text)
			}
		})
	}
	cfg := cfgFor(filepath.Join(dir, "missing.csv"))
	if _, err := Prepare(context.Background(), src, cfg); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.csv") {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist naming the file", err)
	}
}

// TestPrepareWithUsesStoredNormalizer runs a normaliser and instrument
// fitted on one file over another.
func TestPrepareWithUsesStoredNormalizer(t *testing.T) {
	btc, err := Prepare(context.Background(), prices.Source{}, cfgFor(btcPath))
	if err != nil {
		t.Fatal(err)
	}
	spx, err := prices.Source{}.Bars(context.Background(), spxPath)
	if err != nil {
		t.Fatal(err)
	}
	b := spx.Slice(0, 2000)
	ds, err := PrepareWith(b, btc.Norm, btc.Instrument)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Train.Len() != 0 || ds.Valid != (Range{FeatureWarmup, 2000}) || ds.Instrument != btc.Instrument || ds.Norm != btc.Norm {
		t.Errorf("train %v valid %v instrument %+v", ds.Train, ds.Valid, ds.Instrument)
	}
	checkDataset(t, ds, config.EnvConfig{PointValue: btc.Instrument.PointValue})

	bad := btc.Instrument
	bad.PointValue = 0
	if _, err := PrepareWith(b, btc.Norm, bad); err == nil || !strings.Contains(err.Error(), "point_value") {
		t.Errorf("auto point value: err = %v", err)
	}
	if _, err := PrepareWith(spx.Slice(0, FeatureWarmup+1), btc.Norm, btc.Instrument); err == nil {
		t.Error("bars shorter than the warmup accepted")
	}
	if _, err := PrepareWith(nil, btc.Norm, btc.Instrument); err == nil {
		t.Error("nil bars accepted")
	}
}

// TestInstrumentCostsFollowThePriceLevel: presets cost a fixed number of
// price points (so their bps fall as the price rises), "bps" costs the
// same share of any price, "auto" picks the data file's documented
// instrument, and the point value is resolved at the reference price.
func TestInstrumentCostsFollowThePriceLevel(t *testing.T) {
	e := config.Defaults().Env
	es, err := ResolveInstrument(e, "bundled:USA500IDXUSD_H1.csv", 4000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if es.Name != "ES" || es.PointValue != 100000.0/(4*4000) || es.TickSize != 0.25 || es.SlippageTicks != 1 {
		t.Errorf("auto on the bundled S&P: %+v, want ES, point value 6.25, tick 0.25", es)
	}
	// ES: 0.25 slippage + 2.50/50 = 0.05 commission per side, 0.6 points a round trip.
	if got, want := es.RoundTripBps(4000), 0.6/4000*1e4; math.Abs(got-want) > 1e-12 {
		t.Errorf("ES round trip at 4000 = %g bps, want %g", got, want)
	}
	if es.RoundTripBps(60) < 50*es.RoundTripBps(4000)*0.99 {
		t.Errorf("a tick-priced instrument should cost more bps at a lower price: %g at 60, %g at 4000", es.RoundTripBps(60), es.RoundTripBps(4000))
	}
	btc, err := ResolveInstrument(e, "bundled:bitcoin_2024.csv", 60000, 1)
	if err != nil || btc.Name != "BTC" || btc.TickSize != 5 {
		t.Errorf("auto on the bundled bitcoin: %+v, %v; want BTC with tick 5", btc, err)
	}
	bps, err := ResolveInstrument(e, "prices.csv", 60, 1)
	if err != nil || bps.Name != config.InstrumentBps {
		t.Fatalf("auto on another file: %+v, %v; want bps", bps, err)
	}
	for _, p := range []float64{60, 4000, 60000} {
		if got, want := bps.RoundTripBps(p), 2*(e.SlippageBps+e.CommissionBps); math.Abs(got-want) > 1e-9 {
			t.Errorf("bps round trip at %g = %g bps, want %g", p, got, want)
		}
	}
	e.Instrument, e.PointValue = config.InstrumentCustom, 50
	cu, err := ResolveInstrument(e, "bundled:USA500IDXUSD_H1.csv", 4000, 1)
	if err != nil || cu.PointValue != 50 || cu.Commission != e.Commission || cu.TickSize != e.TickSize {
		t.Errorf("custom: %+v, %v; want the config's point value, tick and commission", cu, err)
	}
	for _, name := range config.InstrumentPresets {
		if _, ok := Presets[name]; !ok {
			t.Errorf("config names preset %s, market has no numbers for it", name)
		}
	}
	if _, err := ResolveInstrument(e, "x.csv", math.NaN(), 1); err == nil {
		t.Error("a NaN reference price was accepted")
	}
}

// TestObsLayout: features of bar t, then the agent's values, zero-padded.
func TestObsLayout(t *testing.T) {
	ds := &Dataset{Features: make([]float32, 3*NumFeatures)}
	for i := range ds.Features {
		ds.Features[i] = float32(i)
	}
	dst := make([]float32, ObsDim+2)
	for i := range dst {
		dst[i] = -1
	}
	ds.Obs(2, []float32{7, 8, 9}, dst)
	for j := 0; j < NumFeatures; j++ {
		if dst[j] != float32(2*NumFeatures+j) {
			t.Fatalf("obs[%d] = %v, want feature %d of bar 2", j, dst[j], j)
		}
	}
	want := []float32{7, 8, 9, 0, 0, 0, 0, 0, -1, -1}
	for k, w := range want {
		if dst[NumFeatures+k] != w {
			t.Errorf("obs[%d] = %v, want %v", NumFeatures+k, dst[NumFeatures+k], w)
		}
	}
}

// TestRollingWindowFollowsTheEndOfTheData: with data.valid_bars the last
// bars validate and the data.train_bars before them train, so the same
// config on a longer file (fresh data) moves both ranges to the newest bars.
func TestRollingWindowFollowsTheEndOfTheData(t *testing.T) {
	cfg := config.Defaults()
	cfg.Data.Path, cfg.Data.ValidBars, cfg.Data.TrainBars = prices.SyntheticPath, 500, 2000
	for _, n := range []int{4000, 6000} {
		cfg.Data.SyntheticBars = n
		ds, err := Prepare(context.Background(), prices.Source{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if ds.Valid != (Range{n - 500, n}) || ds.Train != (Range{n - 2500, n - 500}) {
			t.Errorf("%d bars: train %v valid %v, want [%d, %d) and [%d, %d)", n, ds.Train, ds.Valid, n-2500, n-500, n-500, n)
		}
		if ds.Norm != fitted(mustFeatures(ds.Bars), ds.Train, defaultDrop(t)) {
			t.Errorf("%d bars: normaliser not fitted on the rolling training range", n)
		}
	}
	cfg.Data.SyntheticBars, cfg.Data.TrainBars = 4000, 0 // train on everything before the window
	if ds, err := Prepare(context.Background(), (prices.Source{}), cfg); err != nil || ds.Train != (Range{ds.Warmup, 3500}) {
		t.Errorf("train_bars 0: train %v, %v; want [warmup, 3500)", ds.Train, err)
	}
	cfg.Data.ValidBars = 3900 // leaves too little to train on
	var fe *config.FieldError
	if _, err := Prepare(context.Background(), (prices.Source{}), cfg); !errors.As(err, &fe) || fe.Field != "data.valid_bars" {
		t.Errorf("a window that leaves no training range: %v, want a field error naming data.valid_bars", err)
	}
}

func mustFeatures(b *prices.Bars) []float64 {
	raw, _ := ComputeFeatures(b)
	return raw
}

// defaultDrop is the Drop bits of config.DefaultDropFeatures.
func defaultDrop(t *testing.T) uint64 {
	t.Helper()
	d, err := DropFeatures(config.DefaultDropFeatures)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDefaultsDropCalendarAndVolume: the default config hides the hour,
// weekday and volume features and shows the other 49; a stored config
// written before data.drop_features existed shows every feature.
func TestDefaultsDropCalendarAndVolume(t *testing.T) {
	ds, err := Prepare(context.Background(), prices.Source{}, cfgFor(btcPath))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for j, n := range FeatureNames {
		if ds.Norm.Drop&(1<<j) != 0 {
			names = append(names, n)
		}
	}
	if got := strings.Join(names, ","); got != "hour_sin,hour_cos,dow_sin,dow_cos,volume_z_24,volume_ratio_168,volume_trend_24_168" {
		t.Errorf("default drops %s", got)
	}
	old, err := config.DecodeStored("old.json", []byte(`{"data": {"path": "bundled:bitcoin_2024.csv", "test_fraction": 0.15}, "env": {"instrument": "auto", "flat_margin": 0.05}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := Prepare(context.Background(), (prices.Source{}), old); err != nil || ds.Norm.Drop != 0 {
		t.Errorf("a stored config without data.drop_features: drop %#x, %v; want every feature", ds.Norm.Drop, err)
	}
}
