package market

import (
	"fmt"
	"time"

	"github.com/dqnflow/dqnflow/config"
)

// SyntheticPath is the data.path value that selects the seeded synthetic
// series (Synthetic) instead of a file.
const SyntheticPath = "synthetic"

// Prepare builds the Dataset of a run: it loads cfg.Data.Path (a CSV file,
// "bundled:NAME" or "synthetic", which generates cfg.Data.SyntheticBars bars
// from cfg.Seed), computes the features and ATR(14), splits the bars into a
// training and a validation range, fits the Normalizer on the training range
// only and resolves the instrument at the first training bar's close.
//
// The split: when any of data.train_from, train_to, valid_from, valid_to is
// set, ranges are by time, each a half-open [from, to) (an end time is
// exclusive). A missing train_from is the first bar, a missing train_to is
// valid_from when that lies after the training start and the end of the
// data otherwise, a missing
// valid_from is the end of training and a missing valid_to the last bar.
// Otherwise the bars after the feature warmup split at data.train_fraction:
// the first part trains and the rest validates. Training never starts before
// the warmup (nor does validation). The ranges must not overlap, training
// must hold at least env.episode_bars+2 bars and validation at least 2; a
// split that breaks this is a *config.FieldError naming the field to change.
func Prepare(cfg config.RunConfig) (*Dataset, error) {
	dc := cfg.Data
	var b *Bars
	var err error
	if dc.Path == SyntheticPath {
		b, _, err = Synthetic(dc.SyntheticBars, cfg.Seed)
	} else {
		b, err = LoadBars(dc.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("config data.path: %w", err)
	}
	raw, warmup := ComputeFeatures(b)
	if b.Len() < warmup+cfg.Env.EpisodeBars+4 {
		field, value := "data.path", any(dc.Path)
		if dc.Path == SyntheticPath {
			field, value = "data.synthetic_bars", dc.SyntheticBars
		}
		return nil, &config.FieldError{Field: field, Value: value, Allowed: fmt.Sprintf(
			"the data holds %d bars; it needs at least %d (feature warmup %d + env.episode_bars %d + 2 training + 2 validation)",
			b.Len(), warmup+cfg.Env.EpisodeBars+4, warmup, cfg.Env.EpisodeBars)}
	}
	train, valid, err := split(b, warmup, cfg)
	if err != nil {
		return nil, err
	}
	ds := build(b, raw, warmup, FitNormalizer(raw, train))
	ds.Train, ds.Valid = train, valid
	ds.Instrument = ResolveInstrument(cfg.Env, b.Close[train.To-1])
	return ds, nil
}

// PrepareWith builds a Dataset for running an already trained policy on
// bars b: the features are normalised with the run's stored Normalizer and
// the instrument is the run's resolved one. Train is empty; Valid is every
// bar from the warmup on.
func PrepareWith(b *Bars, norm Normalizer, inst Instrument) (*Dataset, error) {
	if b == nil {
		return nil, fmt.Errorf("prepare dataset: no bars")
	}
	if err := checkInstrument(inst); err != nil {
		return nil, fmt.Errorf("prepare dataset %s: %w", b.Name, err)
	}
	raw, warmup := ComputeFeatures(b)
	if b.Len() < warmup+2 {
		return nil, fmt.Errorf("prepare dataset %s: %d bars, need at least %d (feature warmup %d + 2)",
			b.Name, b.Len(), warmup+2, warmup)
	}
	ds := build(b, raw, warmup, norm)
	ds.Valid = Range{From: warmup, To: b.Len()}
	ds.Instrument = inst
	return ds, nil
}

// build normalises the rows from warmup on and fills what every Dataset has.
func build(b *Bars, raw []float64, warmup int, norm Normalizer) *Dataset {
	feats := make([]float32, b.Len()*NumFeatures)
	norm.Apply(raw[warmup*NumFeatures:], feats[warmup*NumFeatures:])
	return &Dataset{
		Bars: b, Features: feats, Norm: norm, ATR: ATR(b, 14), Warmup: warmup,
		BarsPerYear: b.BarsPerYear(),
	}
}

// checkInstrument rejects an instrument that cannot price a trade.
func checkInstrument(i Instrument) error {
	switch {
	case !(i.TickSize > 0):
		return fmt.Errorf("instrument tick_size %v: must be positive", i.TickSize)
	case !(i.PointValue > 0):
		return fmt.Errorf("instrument point_value %v: must be positive (resolved, not auto)", i.PointValue)
	case i.MaxContracts < 1:
		return fmt.Errorf("instrument max_contracts %d: must be at least 1", i.MaxContracts)
	case !(i.InitialCapital > 0):
		return fmt.Errorf("instrument initial_capital %v: must be positive", i.InitialCapital)
	case !(i.SlippageTicks >= 0) || !(i.Commission >= 0):
		return fmt.Errorf("instrument slippage_ticks %v, commission %v: must not be negative", i.SlippageTicks, i.Commission)
	}
	return nil
}

// ResolveInstrument turns the env config into an Instrument. A PointValue
// of 0 means auto: InitialCapital / (MaxContracts · refPrice), so that a
// full position's notional equals the initial capital at refPrice (Prepare
// passes the last training bar's close, the price nearest to the
// validation range). refPrice must be positive for
// auto; otherwise PointValue stays 0, which PrepareWith rejects.
func ResolveInstrument(e config.EnvConfig, refPrice float64) Instrument {
	inst := Instrument{
		TickSize: e.TickSize, SlippageTicks: e.SlippageTicks, Commission: e.Commission,
		PointValue: e.PointValue, MaxContracts: e.MaxContracts, InitialCapital: e.InitialCapital,
	}
	if inst.PointValue == 0 && refPrice > 0 && e.MaxContracts > 0 {
		inst.PointValue = e.InitialCapital / (float64(e.MaxContracts) * refPrice)
	}
	return inst
}

// split chooses the training and validation ranges (Prepare documents how).
func split(b *Bars, warmup int, cfg config.RunConfig) (train, valid Range, err error) {
	dc := cfg.Data
	n := b.Len()
	minTrain := cfg.Env.EpisodeBars + 2
	timed := dc.TrainFrom != "" || dc.TrainTo != "" || dc.ValidFrom != "" || dc.ValidTo != ""
	if dc.ValidBars > 0 {
		// Rolling window at the end of the data.
		valid = Range{max(n-dc.ValidBars, warmup), n}
		from := warmup
		if dc.TrainBars > 0 {
			from = max(valid.From-dc.TrainBars, warmup)
		}
		train = Range{from, valid.From}
		if train.Len() < minTrain || valid.Len() < dc.ValidBars {
			return train, valid, &config.FieldError{Field: "data.valid_bars", Value: dc.ValidBars, Allowed: fmt.Sprintf(
				"with data.train_bars %d leaves training %s (%d bars, need ≥ env.episode_bars+2 = %d) and validation %s of the %d bars after the warmup",
				dc.TrainBars, train, train.Len(), minTrain, valid, n-warmup)}
		}
		return train, valid, nil
	}
	if !timed {
		cut := warmup + int(dc.TrainFraction*float64(n-warmup))
		train, valid = Range{warmup, cut}, Range{cut, n}
		if train.Len() < minTrain || valid.Len() < 2 {
			return train, valid, &config.FieldError{Field: "data.train_fraction", Value: dc.TrainFraction, Allowed: fmt.Sprintf(
				"splits the %d bars after the warmup into training %s (%d bars, need ≥ env.episode_bars+2 = %d) and validation %s (%d bars, need ≥ 2)",
				n-warmup, train, train.Len(), minTrain, valid, valid.Len())}
		}
		return train, valid, nil
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
		return train, valid, err
	}
	vf, err := at("data.valid_from", dc.ValidFrom, -1)
	if err != nil {
		return train, valid, err
	}
	defTrainTo := n
	if vf > max(tf, warmup) {
		defTrainTo = vf // training runs up to a later validation
	}
	tt, err := at("data.train_to", dc.TrainTo, defTrainTo)
	if err != nil {
		return train, valid, err
	}
	if vf < 0 {
		vf = tt
	}
	vt, err := at("data.valid_to", dc.ValidTo, n)
	if err != nil {
		return train, valid, err
	}
	train = Range{max(tf, warmup), max(tt, warmup)}
	valid = Range{max(vf, warmup), max(vt, warmup)}

	// blame names the first of fields that the config sets (the one to
	// change), else the first time field that is set at all.
	given := map[string]string{"data.train_from": dc.TrainFrom, "data.train_to": dc.TrainTo,
		"data.valid_from": dc.ValidFrom, "data.valid_to": dc.ValidTo}
	blame := func(fields ...string) (string, string) {
		for _, f := range append(fields, "data.train_from", "data.train_to", "data.valid_from", "data.valid_to") {
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
	if train.Len() < minTrain {
		f, v := blame("data.train_to", "data.train_from")
		return train, valid, &config.FieldError{Field: f, Value: fmt.Sprintf("%q", v), Allowed: fmt.Sprintf(
			"the training range %s holds %d bars (data %s to %s, features from bar %d); it needs at least env.episode_bars+2 = %d",
			span(train), max(train.Len(), 0), b.Time[0].Format(time.DateTime), b.Time[n-1].Format(time.DateTime), warmup, minTrain)}
	}
	if valid.Len() < 2 {
		f, v := blame("data.valid_to", "data.valid_from")
		return train, valid, &config.FieldError{Field: f, Value: fmt.Sprintf("%q", v), Allowed: fmt.Sprintf(
			"the validation range %s holds %d bars (data %s to %s, features from bar %d); it needs at least 2",
			span(valid), max(valid.Len(), 0), b.Time[0].Format(time.DateTime), b.Time[n-1].Format(time.DateTime), warmup)}
	}
	if train.From < valid.To && valid.From < train.To {
		f, v := blame("data.valid_from", "data.train_to")
		return train, valid, &config.FieldError{Field: f, Value: fmt.Sprintf("%q", v), Allowed: fmt.Sprintf(
			"the validation range %s overlaps the training range %s; they must be disjoint", span(valid), span(train))}
	}
	return train, valid, nil
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
