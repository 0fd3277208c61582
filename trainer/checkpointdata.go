package trainer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// CheckpointConfig returns the validated run config stored in ck's metadata.
func CheckpointConfig(ck *checkpoint.Checkpoint) (config.RunConfig, error) {
	raw, ok := ck.Meta[checkpoint.MetaConfig]
	if !ok {
		return config.RunConfig{}, fmt.Errorf("checkpoint metadata has no %q", checkpoint.MetaConfig)
	}
	return config.Decode("checkpoint metadata "+checkpoint.MetaConfig, []byte(raw))
}

// CheckpointMarket returns the instrument and the feature normalisation
// stored in ck's metadata: what a policy needs besides its weights.
func CheckpointMarket(ck *checkpoint.Checkpoint) (market.Instrument, market.Normalizer, error) {
	var inst market.Instrument
	var norm market.Normalizer
	if err := json.Unmarshal([]byte(ck.Meta[checkpoint.MetaInstrument]), &inst); err != nil {
		return inst, norm, fmt.Errorf("checkpoint metadata %q: %w", checkpoint.MetaInstrument, err)
	}
	if err := json.Unmarshal([]byte(ck.Meta[checkpoint.MetaNormalizer]), &norm); err != nil {
		return inst, norm, fmt.Errorf("checkpoint metadata %q: %w", checkpoint.MetaNormalizer, err)
	}
	return inst, norm, nil
}

// CheckpointDataset loads dataPath (a CSV file, "bundled:NAME" or
// "synthetic") for the policy saved in ck: features are normalised with the
// checkpoint's statistics and trades use its instrument, so a policy runs on
// any data as it ran in training. One exception: when the run's point value
// was automatic (env.point_value 0) and dataPath is not the run's training
// data, the point value is resolved again on dataPath's first usable bar, so
// that a full position is worth the initial capital on that instrument too
// (an S&P 500 point value would lever a BTC backtest 13 times). The
// dataset's Valid range is every bar with full feature history.
func CheckpointDataset(ck *checkpoint.Checkpoint, dataPath string) (config.RunConfig, *market.Dataset, error) {
	cfg, err := CheckpointConfig(ck)
	if err != nil {
		return cfg, nil, err
	}
	inst, norm, err := CheckpointMarket(ck)
	if err != nil {
		return cfg, nil, err
	}
	var bars *market.Bars
	if dataPath == market.SyntheticPath {
		bars, _, err = market.Synthetic(cfg.Data.SyntheticBars, cfg.Seed)
	} else {
		bars, err = market.LoadBars(dataPath)
	}
	if err != nil {
		return cfg, nil, err
	}
	if cfg.Env.PointValue == 0 && !SameDataPath(cfg.Data.Path, dataPath) {
		if w := market.FeatureWarmup; w < bars.Len() {
			inst = market.ResolveInstrument(cfg.Env, bars.Close[w])
		}
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
	if strings.Contains(a, ":") || strings.Contains(b, ":") || a == market.SyntheticPath || b == market.SyntheticPath {
		return false
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}
