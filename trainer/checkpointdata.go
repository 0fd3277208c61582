package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// CheckpointConfig returns the validated run config stored in ck's
// metadata, read with config.DecodeStored: a checkpoint written before the
// test range and instrument presets existed keeps the meaning it had.
func CheckpointConfig(ck *checkpoint.Checkpoint) (config.RunConfig, error) {
	raw, ok := ck.Meta[checkpoint.MetaConfig]
	if !ok {
		return config.RunConfig{}, fmt.Errorf("checkpoint metadata has no %q", checkpoint.MetaConfig)
	}
	return config.DecodeStored("checkpoint metadata "+checkpoint.MetaConfig, []byte(raw))
}

// CheckComplete reports the first tensor of the model contract
// (trainer/model) that ck lacks or holds with another dtype or shape, for
// the model of the config in ck's metadata: the learner state of a
// training checkpoint (model.StateSpecs), or the network of a file of
// `dqnflow checkpoint export` (model.ParamSpecs without a prefix, in the
// dtype its metadata names). The error names the tensor and wraps
// checkpoint.ErrMissingTensor or ErrTensorMismatch. With checkpoint.Read,
// which refuses NaN and Inf, it is what a reader of a checkpoint file
// checks before using it.
func CheckComplete(ck *checkpoint.Checkpoint) error {
	cfg, err := CheckpointConfig(ck)
	if err != nil {
		return err
	}
	specs := model.StateSpecs(cfg.Model)
	if dt, exported := ck.Meta[checkpoint.MetaDType]; exported {
		switch d := checkpoint.DType(dt); d {
		case checkpoint.F32, checkpoint.BF16, checkpoint.F16:
			specs = model.ParamSpecs(cfg.Model, "", d)
		default:
			return fmt.Errorf("checkpoint metadata %q is %q: want F32, BF16 or F16 (%w)", checkpoint.MetaDType, dt, checkpoint.ErrTensorMismatch)
		}
	}
	return ck.Require(specs)
}

// CheckpointMarket returns the instrument and the feature normalisation
// stored in ck's metadata: what a policy needs besides its weights. A
// normaliser stored without a mode (every checkpoint written before
// data.normalize existed) is the training-range one it always was.
func CheckpointMarket(ck *checkpoint.Checkpoint) (market.Instrument, market.Normalizer, error) {
	var inst market.Instrument
	var norm market.Normalizer
	if err := json.Unmarshal([]byte(ck.Meta[checkpoint.MetaInstrument]), &inst); err != nil {
		return inst, norm, fmt.Errorf("checkpoint metadata %q: %w", checkpoint.MetaInstrument, err)
	}
	if err := json.Unmarshal([]byte(ck.Meta[checkpoint.MetaNormalizer]), &norm); err != nil {
		return inst, norm, fmt.Errorf("checkpoint metadata %q: %w", checkpoint.MetaNormalizer, err)
	}
	if err := norm.Check(); err != nil {
		return inst, norm, fmt.Errorf("checkpoint metadata %q: %w", checkpoint.MetaNormalizer, err)
	}
	return inst, norm, nil
}

// CheckpointDataset loads dataPath (a CSV file that src reads,
// "bundled:NAME" or "synthetic") for the policy saved in ck: features are normalised with the
// checkpoint's statistics, and trades are priced with
//
//   - the checkpoint's own instrument when dataPath is the run's training
//     data (its data.path; a panel run's, with data.series, has none: its
//     series are backtested on their own, market.PreparePanel) and costs
//     is nil: the policy runs as it ran in training;
//   - otherwise the instrument of dataPath: the run's contracts, capital
//     and margin floor, with the file's documented costs (env.instrument
//     "auto", point value auto, the default slippage) and then costs, when
//     not nil, applied on top (the command line's overrides). A
//     checkpoint's tick size never prices another series: an S&P tick on a
//     series priced around 60 is 0.4 % a fill.
//
// The contract is sized as every backtest sizes it (market.Sizing,
// market.TradedInstrument: at the first fill of the range backtested);
// the dataset's instrument is resolved on dataPath's first bar with full
// feature history. The dataset's Valid range is every such bar; Test is empty.
func CheckpointDataset(ctx context.Context, src prices.Source, ck *checkpoint.Checkpoint, dataPath string, costs func(*config.EnvConfig)) (config.RunConfig, *market.Dataset, error) {
	cfg, err := CheckpointConfig(ck)
	if err != nil {
		return cfg, nil, err
	}
	inst, norm, err := CheckpointMarket(ck)
	if err != nil {
		return cfg, nil, err
	}
	var bars *prices.Bars
	if dataPath == prices.SyntheticPath {
		bars, _, err = market.SyntheticSeries(cfg.Data.SyntheticBars, cfg.Seed, cfg.Data.SyntheticPhi)
	} else {
		bars, err = src.Bars(ctx, dataPath)
	}
	if err != nil {
		return cfg, nil, err
	}
	own := cfg.Data.Series == "" && SameDataPath(cfg.Data.Path, dataPath)
	if costs != nil || !own {
		env := config.Defaults().Env
		env.MaxContracts, env.InitialCapital, env.MarginFloor = cfg.Env.MaxContracts, cfg.Env.InitialCapital, cfg.Env.MarginFloor
		env.Sizing, env.TargetVol = cfg.Env.Sizing, cfg.Env.TargetVol
		if costs != nil {
			costs(&env)
		}
		check := config.Defaults()
		check.Env = env
		if err := check.Validate(); err != nil {
			return cfg, nil, err
		}
		w := min(market.FeatureWarmup+norm.BurnIn, bars.Len()-1)
		if w < 0 {
			return cfg, nil, fmt.Errorf("data %s has no bars", dataPath)
		}
		// The leverage is the run's own on its own data (estimated on its
		// training range); on another file, the same rule on that file's
		// training range (market.SizingFor).
		lev := inst.Leverage
		if !own || !(lev > 0) {
			c := cfg
			c.Data.Path, c.Env = dataPath, env
			if lev, err = market.SizingFor(c, bars); err != nil {
				return cfg, nil, err
			}
		}
		if inst, err = market.ResolveInstrument(env, dataPath, bars.Close[w], lev); err != nil {
			return cfg, nil, err
		}
	} else if inst.Sizing == "" && cfg.Env.PointValue == 0 {
		inst = market.LegacySizing(inst)
	}
	ds, err := market.PrepareWith(bars, norm, inst)
	return cfg, ds, err
}

// SameDataPath reports whether two data paths name the same data: equal
// strings, or two file paths to the same absolute path.
func SameDataPath(a, b string) bool {
	if a == b {
		return true
	}
	if strings.Contains(a, ":") || strings.Contains(b, ":") || a == prices.SyntheticPath || b == prices.SyntheticPath {
		return false
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// PanelMeta is what the checkpoints of a run on panel p carry besides a
// single series run's: checkpoint.MetaPanel (p.Meta: every series' file,
// SHA-256 and ranges) and, as checkpoint.MetaInstrument, the first
// series' own instrument, not the joined training set's, whose costs live
// in its bars (market.JoinPanel): a backtest priced with that one would
// trade free. A backend's Snapshot records the joined set's; callers
// write these over it, keeping the joined set's as
// checkpoint.MetaPanelInstrument for a restore (ForRestore).
func PanelMeta(p *market.Panel) (map[string]string, error) {
	v, err := p.Meta()
	if err != nil {
		return nil, err
	}
	inst, err := json.Marshal(p.Parts[0].Instrument)
	if err != nil {
		return nil, fmt.Errorf("panel instrument: %w", err)
	}
	joined, err := json.Marshal(p.Train.Instrument)
	if err != nil {
		return nil, fmt.Errorf("panel instrument: %w", err)
	}
	return map[string]string{checkpoint.MetaPanel: v, checkpoint.MetaInstrument: string(inst), checkpoint.MetaPanelInstrument: string(joined)}, nil
}

// ForRestore is ck as a backend's Restore takes it: a panel run's
// checkpoint with its joined training set's instrument
// (checkpoint.MetaPanelInstrument) as its instrument, which Restore
// checks the dataset's against, since the trainer is restored into that
// set; any other checkpoint as it is. ck itself is not changed.
func ForRestore(ck *checkpoint.Checkpoint) *checkpoint.Checkpoint {
	v, ok := ck.Meta[checkpoint.MetaPanelInstrument]
	if !ok {
		return ck
	}
	c := *ck
	c.Meta = maps.Clone(ck.Meta)
	c.Meta[checkpoint.MetaInstrument] = v
	return &c
}
