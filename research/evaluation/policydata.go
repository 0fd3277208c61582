package evaluation

import (
	"context"
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/usage"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// PolicyData is a checkpoint's greedy policy on a data file: the data
// prepared with the checkpoint's statistics, the bar range chosen, what
// that range is (for the reader) and the recommendation of the run that
// chose the checkpoint (nil: it recorded none).
type PolicyData struct {
	Policy         *policy.Policy
	Dataset        *market.Dataset
	Range          market.Range
	What           string
	Recommendation *checkpoint.Recommendation
}

// OpenPolicyData loads the greedy policy of ck (read from ckPath) and the
// data file, with features normalised by the checkpoint's statistics and
// trades priced as trainer.CheckpointDataset says (costs: the command
// line's overrides), and picks the bar range: --from/--to when given;
// otherwise, on the run's own training data, its test range (rangeName
// "test", the default: the one range neither training nor checkpoint
// selection saw), validation range or all bars; on another file every
// bar with full feature history. src reads the data.
func OpenPolicyData(ctx context.Context, src prices.Source, ck *checkpoint.Checkpoint, ckPath, dataPath, rangeName, from, to string, costs func(*config.EnvConfig)) (PolicyData, error) {
	fail := func(err error) (PolicyData, error) { return PolicyData{}, err }
	var (
		pol  *policy.Policy
		r    market.Range
		what string
		rec  *checkpoint.Recommendation
		err  error
	)
	if pol, err = policy.Load(ck); err != nil {
		return fail(fmt.Errorf("checkpoint %s: %w", ckPath, err))
	}
	if rec, err = RunRecommendation(ck, ckPath); err != nil {
		return fail(err)
	}
	cfg, ds, err := trainer.CheckpointDataset(ctx, src, ck, dataPath, costs)
	if err != nil {
		return fail(fmt.Errorf("checkpoint %s with data %s: %w", ckPath, dataPath, err))
	}
	r = ds.Valid
	what = "all bars of " + dataPath + " (not the run's training data)"
	if cfg.Data.Series == "" && trainer.SameDataPath(cfg.Data.Path, dataPath) { // a panel run's series: backtest it without --data
		what = "all bars of the run's data " + dataPath + ", training range included"
		if rangeName != "all" {
			trainDS, err := market.Prepare(ctx, src, withData(cfg, dataPath))
			if err != nil {
				return fail(fmt.Errorf("checkpoint %s: the ranges of its config on %s: %w", ckPath, dataPath, err))
			}
			switch {
			case rangeName == "test" && trainDS.Test.Len() >= 2:
				r, what = trainDS.Test, "test range of the run (held out from training and checkpoint selection)"
			case rangeName == "test":
				r, what = trainDS.Valid, "validation range of the run: its config holds out no test range, and this range picked the checkpoint, so it flatters it"
			default:
				r, what = trainDS.Valid, "validation range of the run (it picked the checkpoint)"
			}
		}
	}
	if from != "" {
		t, err := config.ParseTime(from)
		if err != nil {
			return fail(fmt.Errorf("%w: flag --from: %v", usage.Err, err))
		}
		r.From = max(ds.Bars.Index(t), ds.Warmup)
		what = "bars from --from/--to"
	}
	if to != "" {
		t, err := config.ParseTime(to)
		if err != nil {
			return fail(fmt.Errorf("%w: flag --to: %v", usage.Err, err))
		}
		r.To = ds.Bars.Index(t)
		what = "bars from --from/--to"
	}
	if r.Len() < 2 {
		return fail(fmt.Errorf("%w: the range %s .. %s of %s holds %d usable bars (features need %d bars of history); widen --from/--to",
			usage.Err, orAll(from), orAll(to), dataPath, max(r.Len(), 0), ds.Warmup))
	}
	return PolicyData{Policy: pol, Dataset: ds, Range: r, What: what, Recommendation: rec}, nil
}

func withData(cfg config.RunConfig, path string) config.RunConfig {
	cfg.Data.Path = path
	return cfg
}

func orAll(s string) string {
	if s == "" {
		return "(all)"
	}
	return s
}
