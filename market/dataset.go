package market

import (
	"context"
	"fmt"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
)

// Prepare builds the Dataset of a run: it loads cfg.Data.Path (a CSV file
// inside s's roots, "bundled:NAME" or "synthetic", which generates
// cfg.Data.SyntheticBars bars from cfg.Seed; Load), computes the features and ATR(14), splits the bars into a
// training, a validation and a test range, makes the Normalizer
// (data.normalize: fitted on the training range only, or causal, scaling
// every bar by its own past; Normalizer) and resolves the instrument at
// the last training bar's close.
//
// The split (config.DataConfig): when any of data.train_from, train_to,
// valid_from, valid_to, test_from, test_to is set, ranges are by time, each
// a half-open [from, to) (an end time is exclusive). A missing train_from is
// the first bar, a missing train_to is valid_from when that lies after the
// training start and the end of the data otherwise, a missing valid_from is
// the end of training, a missing valid_to is test_from when given and the
// last bar otherwise; a missing test_from is valid_to, a missing test_to the
// last bar, and with neither test time there is no test range. Otherwise
// the n bars after the feature warmup split by fraction: the first
// ⌊train_fraction·n⌋ train, the last ⌊test_fraction·n⌋ test and the bars
// between validate; or, with data.valid_bars, the newest test_bars bars test
// and the valid_bars before them validate. Training never starts before the
// warmup (nor does validation); with causal normalisation no range starts
// before the end of its burn-in (CausalBurnIn bars after the feature
// warmup, which belong to no range): the ranges are train mode's with
// that cut, which in practice shortens training alone, so both modes
// validate and test on the same bars. The ranges must not overlap, training must
// hold at least env.episode_bars+2 bars, validation at least 2 and a test
// range (when there is one) at least 2; a split that breaks this is a
// *config.FieldError naming the field to change.
func Prepare(ctx context.Context, s prices.Source, cfg config.RunConfig) (*Dataset, error) {
	b, err := Load(ctx, s, cfg)
	if err != nil {
		return nil, err
	}
	return prepare(b, cfg)
}

// prepare is Prepare on the loaded bars b.
func prepare(b *prices.Bars, cfg config.RunConfig) (*Dataset, error) {
	dc := cfg.Data
	raw, featureWarmup := ComputeFeatures(b)
	norm := unfitted(dc)
	if need := featureWarmup + norm.BurnIn + cfg.Env.EpisodeBars + 4; b.Len() < need {
		field, value := "data.path", any(dc.Path)
		if dc.Path == prices.SyntheticPath {
			field, value = "data.synthetic_bars", dc.SyntheticBars
		}
		burnIn := ""
		if norm.BurnIn > 0 {
			burnIn = fmt.Sprintf(" + causal normalisation burn-in %d", norm.BurnIn)
		}
		return nil, &config.FieldError{Field: field, Value: value, Allowed: fmt.Sprintf(
			"the data holds %d bars; it needs at least %d (feature warmup %d%s + env.episode_bars %d + 2 training + 2 validation)",
			b.Len(), need, featureWarmup, burnIn, cfg.Env.EpisodeBars)}
	}
	train, valid, test, err := split(b, featureWarmup, cfg)
	if err != nil {
		return nil, err
	}
	if norm.Drop, err = DropFeatures(dc.DropFeatures); err != nil {
		return nil, &config.FieldError{Field: "data.drop_features", Value: fmt.Sprintf("%q", dc.DropFeatures), Allowed: err.Error()}
	}
	var ds *Dataset
	if dc.Mirror {
		if ds, err = withMirror(b, raw, featureWarmup, train, norm); err != nil {
			return nil, fmt.Errorf("config data.mirror: %w", err)
		}
	} else {
		if !norm.Causal() {
			drop := norm.Drop
			norm = FitNormalizer(raw, train)
			norm.Drop = drop
		}
		ds = build(b, raw, featureWarmup, norm)
	}
	ds.Train, ds.Valid, ds.Test = train, valid, test
	if ds.Instrument, err = prepareInstrument(cfg, b, train, ds.BarsPerYear); err != nil {
		return nil, err
	}
	if ts := ds.training; ts != nil {
		ts.Instrument, ts.BarsPerYear = ds.Instrument, ds.BarsPerYear
	}
	return ds, nil
}

// unfitted is the normaliser that data.normalize asks for before any
// statistic is fitted: CausalNormalizer for "causal", else the zero
// Normalizer, which FitNormalizer replaces. Its BurnIn is what Prepare
// adds to the feature warmup.
func unfitted(dc config.DataConfig) Normalizer {
	if dc.Normalize == config.NormalizeCausal {
		return CausalNormalizer(dc.NormalizeHalfLife)
	}
	return Normalizer{}
}

// prepareInstrument is the instrument of a run of cfg on bars b: the
// leverage of Sizing estimated on the training range train, the contract
// sized at its last close (the training environment's reference; a
// backtest resizes it at its own range, TradedInstrument).
func prepareInstrument(cfg config.RunConfig, b *prices.Bars, train Range, barsPerYear float64) (Instrument, error) {
	lev, err := Sizing(cfg.Env, b, train, barsPerYear)
	if err != nil {
		return Instrument{}, fmt.Errorf("config env: %w", err)
	}
	in, err := ResolveInstrument(cfg.Env, cfg.Data.Path, b.Close[train.To-1], lev)
	if err != nil {
		return Instrument{}, fmt.Errorf("config env: %w", err)
	}
	return in, nil
}

// Load returns the bars of cfg.Data.Path: a CSV file inside s's roots
// (Bars), "bundled:NAME" or the synthetic series of cfg.Seed,
// cfg.Data.SyntheticBars and SyntheticPhi.
func Load(ctx context.Context, s prices.Source, cfg config.RunConfig) (*prices.Bars, error) {
	dc := cfg.Data
	var b *prices.Bars
	var err error
	if dc.Path == prices.SyntheticPath {
		b, _, err = SyntheticSeries(dc.SyntheticBars, cfg.Seed, dc.SyntheticPhi)
	} else {
		b, err = s.Bars(ctx, dc.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("config data.path: %w", err)
	}
	return b, nil
}

// PrepareWith builds a Dataset for running an already trained policy on
// bars b: the features are normalised with the run's stored Normalizer (a
// causal one scales b's bars by b's own past, from b's feature warmup on,
// as the run's own bars were) and trades use inst (the run's own
// instrument on its own data, else the one resolved for b). Train and
// Test are empty; Valid is every bar from the warmup (Dataset.Warmup,
// the burn-in included) on.
func PrepareWith(b *prices.Bars, norm Normalizer, inst Instrument) (*Dataset, error) {
	if b == nil {
		return nil, fmt.Errorf("prepare dataset: no bars")
	}
	if err := inst.Check(); err != nil {
		return nil, fmt.Errorf("prepare dataset %s: %w", b.Name, err)
	}
	if err := norm.Check(); err != nil {
		return nil, fmt.Errorf("prepare dataset %s: %w", b.Name, err)
	}
	raw, warmup := ComputeFeatures(b)
	if b.Len() < warmup+norm.BurnIn+2 {
		return nil, fmt.Errorf("prepare dataset %s: %d bars, need at least %d (feature warmup %d + normalisation burn-in %d + 2)",
			b.Name, b.Len(), warmup+norm.BurnIn+2, warmup, norm.BurnIn)
	}
	ds := build(b, raw, warmup, norm)
	ds.Valid = Range{From: ds.Warmup, To: b.Len()}
	ds.Instrument = inst
	return ds, nil
}

// build normalises the rows from warmup on and fills what every Dataset
// has; its Warmup is warmup plus the normaliser's burn-in.
func build(b *prices.Bars, raw []float64, warmup int, norm Normalizer) *Dataset {
	feats := make([]float32, b.Len()*NumFeatures)
	norm.Apply(raw[warmup*NumFeatures:], feats[warmup*NumFeatures:])
	return &Dataset{
		Bars: b, Features: feats, Norm: norm, ATR: ATR(b, 14), Warmup: warmup + norm.BurnIn,
		BarsPerYear: b.BarsPerYear(), Slip: SpreadSlip(b),
	}
}

// split chooses the training, validation and test ranges after the
// feature warmup (Prepare documents how); test is empty when the config
// has none. With causal normalisation every range then starts at the end
// of the burn-in at the earliest, and one that this leaves too short is a
// *config.FieldError naming data.normalize.
func split(b *prices.Bars, warmup int, cfg config.RunConfig) (train, valid, test Range, err error) {
	train, valid, test, err = splitAt(b, warmup, cfg)
	burnIn := unfitted(cfg.Data).BurnIn
	if err != nil || burnIn == 0 {
		return train, valid, test, err
	}
	first := warmup + burnIn
	cut := func(r Range) Range {
		r.From = max(r.From, first)
		r.To = max(r.To, r.From)
		return r
	}
	hadTest := test.Len() > 0
	train, valid, test = cut(train), cut(valid), cut(test)
	minTrain := cfg.Env.EpisodeBars + 2
	for _, c := range []struct {
		name  string
		r     Range
		least int
		short bool
	}{
		{"training", train, minTrain, train.Len() < minTrain},
		{"validation", valid, 2, valid.Len() < 2},
		{"test", test, 2, hadTest && test.Len() < 2},
	} {
		if c.short {
			return train, valid, test, &config.FieldError{Field: "data.normalize", Value: fmt.Sprintf("%q", cfg.Data.Normalize), Allowed: fmt.Sprintf(
				"its burn-in of %d bars after the feature warmup (bars %d to %d) leaves the %s range %s with %d bars, need at least %d: start the ranges later or use \"train\"",
				burnIn, warmup, first-1, c.name, c.r, c.r.Len(), c.least)}
		}
	}
	return train, valid, test, nil
}

// splitAt is split without the burn-in.
func splitAt(b *prices.Bars, warmup int, cfg config.RunConfig) (train, valid, test Range, err error) {
	dc := cfg.Data
	n := b.Len()
	minTrain := cfg.Env.EpisodeBars + 2
	test = Range{n, n}
	if dc.ValidBars > 0 {
		// Rolling window at the end of the data.
		test = Range{max(n-dc.TestBars, warmup), n}
		valid = Range{max(test.From-dc.ValidBars, warmup), test.From}
		from := warmup
		if dc.TrainBars > 0 {
			from = max(valid.From-dc.TrainBars, warmup)
		}
		train = Range{from, valid.From}
		if train.Len() < minTrain || valid.Len() < dc.ValidBars || test.Len() < dc.TestBars || test.Len() == 1 {
			return train, valid, test, &config.FieldError{Field: "data.valid_bars", Value: dc.ValidBars, Allowed: fmt.Sprintf(
				"with data.train_bars %d and data.test_bars %d leaves training %s (%d bars, need ≥ env.episode_bars+2 = %d), validation %s and test %s of the %d bars after the warmup",
				dc.TrainBars, dc.TestBars, train, train.Len(), minTrain, valid, test, n-warmup)}
		}
		return train, valid, test, nil
	}
	if !dc.Timed() {
		usable := n - warmup
		cut := warmup + int(dc.TrainFraction*float64(usable))
		test = Range{n - int(dc.TestFraction*float64(usable)), n}
		train, valid = Range{warmup, cut}, Range{cut, test.From}
		if train.Len() < minTrain || valid.Len() < 2 || test.Len() == 1 {
			return train, valid, test, &config.FieldError{Field: "data.train_fraction", Value: dc.TrainFraction, Allowed: fmt.Sprintf(
				"with data.test_fraction %g splits the %d bars after the warmup into training %s (%d bars, need ≥ env.episode_bars+2 = %d), validation %s (%d bars, need ≥ 2) and test %s (%d bars, need 0 or ≥ 2)",
				dc.TestFraction, usable, train, train.Len(), minTrain, valid, valid.Len(), test, test.Len())}
		}
		return train, valid, test, nil
	}

	// at resolves a config time to a bar index; def is used when s is empty.
	at := func(field, s string, def int) (int, error) {
		if s == "" {
			return def, nil
		}
		t, err := config.ParseTime(s)
		if err != nil {
			return 0, &config.FieldError{Field: field, Value: fmt.Sprintf("%q", s), Allowed: "must be RFC 3339 or YYYY-MM-DD[ HH:MM[:SS]]"}
		}
		return b.Index(t), nil
	}
	tf, err := at("data.train_from", dc.TrainFrom, 0)
	if err != nil {
		return train, valid, test, err
	}
	vf, err := at("data.valid_from", dc.ValidFrom, -1)
	if err != nil {
		return train, valid, test, err
	}
	defTrainTo := n
	if vf > max(tf, warmup) {
		defTrainTo = vf // training runs up to a later validation
	}
	tt, err := at("data.train_to", dc.TrainTo, defTrainTo)
	if err != nil {
		return train, valid, test, err
	}
	if vf < 0 {
		vf = tt
	}
	sf, err := at("data.test_from", dc.TestFrom, -1)
	if err != nil {
		return train, valid, test, err
	}
	defValidTo := n
	if sf >= 0 {
		defValidTo = sf
	}
	vt, err := at("data.valid_to", dc.ValidTo, defValidTo)
	if err != nil {
		return train, valid, test, err
	}
	if dc.TestFrom != "" || dc.TestTo != "" {
		if sf < 0 {
			sf = vt
		}
		st, err := at("data.test_to", dc.TestTo, n)
		if err != nil {
			return train, valid, test, err
		}
		test = Range{max(sf, warmup), max(st, warmup)}
	}
	train = Range{max(tf, warmup), max(tt, warmup)}
	valid = Range{max(vf, warmup), max(vt, warmup)}

	// blame names the first of fields that the config sets (the one to
	// change), else the first time field that is set at all.
	given := map[string]string{"data.train_from": dc.TrainFrom, "data.train_to": dc.TrainTo,
		"data.valid_from": dc.ValidFrom, "data.valid_to": dc.ValidTo, "data.test_from": dc.TestFrom, "data.test_to": dc.TestTo}
	blame := func(fields ...string) (string, string) {
		for _, f := range append(fields, "data.train_from", "data.train_to", "data.valid_from", "data.valid_to", "data.test_from", "data.test_to") {
			if given[f] != "" {
				return f, given[f]
			}
		}
		return fields[0], ""
	}
	span := func(r Range) string {
		if r.Len() <= 0 {
			return r.String()
		}
		return fmt.Sprintf("%s = %s to %s", r, b.Time[r.From].Format(time.DateTime), b.Time[r.To-1].Format(time.DateTime))
	}
	data := fmt.Sprintf("data %s to %s, features from bar %d", b.Time[0].Format(time.DateTime), b.Time[n-1].Format(time.DateTime), warmup)
	if train.Len() < minTrain {
		f, v := blame("data.train_to", "data.train_from")
		return train, valid, test, &config.FieldError{Field: f, Value: fmt.Sprintf("%q", v), Allowed: fmt.Sprintf(
			"the training range %s holds %d bars (%s); it needs at least env.episode_bars+2 = %d",
			span(train), max(train.Len(), 0), data, minTrain)}
	}
	if valid.Len() < 2 {
		f, v := blame("data.valid_to", "data.valid_from")
		return train, valid, test, &config.FieldError{Field: f, Value: fmt.Sprintf("%q", v), Allowed: fmt.Sprintf(
			"the validation range %s holds %d bars (%s); it needs at least 2", span(valid), max(valid.Len(), 0), data)}
	}
	if (dc.TestFrom != "" || dc.TestTo != "") && test.Len() < 2 {
		f, v := blame("data.test_to", "data.test_from")
		return train, valid, test, &config.FieldError{Field: f, Value: fmt.Sprintf("%q", v), Allowed: fmt.Sprintf(
			"the test range %s holds %d bars (%s); it needs at least 2", span(test), max(test.Len(), 0), data)}
	}
	overlap := func(x, y Range) bool { return x.Len() > 0 && y.Len() > 0 && x.From < y.To && y.From < x.To }
	if overlap(train, valid) {
		f, v := blame("data.valid_from", "data.train_to")
		return train, valid, test, &config.FieldError{Field: f, Value: fmt.Sprintf("%q", v), Allowed: fmt.Sprintf(
			"the validation range %s overlaps the training range %s; they must be disjoint", span(valid), span(train))}
	}
	for _, o := range []struct {
		name string
		r    Range
	}{{"training", train}, {"validation", valid}} {
		if overlap(test, o.r) {
			f, v := blame("data.test_from", "data.valid_to")
			return train, valid, test, &config.FieldError{Field: f, Value: fmt.Sprintf("%q", v), Allowed: fmt.Sprintf(
				"the test range %s overlaps the %s range %s; they must be disjoint", span(test), o.name, span(o.r))}
		}
	}
	return train, valid, test, nil
}

// Obs writes the observation at bar t into dst[:ObsDim]: the bar's
// normalised features, then the NumAgentFeatures agent values (missing ones
// are zero). t must be in [0, Bars.Len()) and dst must hold ObsDim values.
func (d *Dataset) Obs(t int, agent []float32, dst []float32) {
	copy(dst[:NumFeatures], d.Features[t*NumFeatures:(t+1)*NumFeatures])
	a := dst[NumFeatures:ObsDim]
	k := copy(a, agent)
	clear(a[k:])
}
