package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// EvaluateInput asks for greedy backtests of several checkpoints on the
// validation range of Config's data window.
type EvaluateInput struct {
	Config      config.RunConfig `json:"config"`
	Checkpoints []CheckpointRef  `json:"checkpoints"`
}

// EvaluateOutput holds one report per checkpoint, in input order.
type EvaluateOutput struct {
	Reports []market.Report `json:"reports"`
}

// EvaluateCheckpoints backtests every checkpoint on the same bars, the
// validation range of in.Config, so that their scores compare: Retrain uses
// it to judge a challenger against the incumbent. Each checkpoint's weights
// are loaded into a fresh trainer built from in.Config, with the model
// section of the checkpoint's own config when it records one (an incumbent
// trained with another architecture still loads).
func (a *Trainer) EvaluateCheckpoints(ctx context.Context, in EvaluateInput) (EvaluateOutput, error) {
	if err := in.Config.Validate(); err != nil {
		return EvaluateOutput{}, classify("evaluate checkpoints", err)
	}
	_, stop := a.beat(ctx, Heartbeat{Stage: "evaluate"})
	defer stop()
	ds, err := a.prepare(in.Config)
	if err != nil {
		return EvaluateOutput{}, nonRetryable(ErrTypeBadData, "evaluate checkpoints: prepare data "+in.Config.Data.Path, err,
			"fix data.path or the file")
	}
	out := EvaluateOutput{Reports: make([]market.Report, 0, len(in.Checkpoints))}
	for _, ref := range in.Checkpoints {
		rep, err := a.evaluate(ctx, in.Config, ds, ref)
		if err != nil {
			return EvaluateOutput{}, err
		}
		out.Reports = append(out.Reports, rep)
	}
	return out, nil
}

func (a *Trainer) evaluate(ctx context.Context, cfg config.RunConfig, ds *market.Dataset, ref CheckpointRef) (market.Report, error) {
	what := "evaluate " + ref.URI
	ck, err := a.read(ref)
	if err != nil {
		return market.Report{}, readError(what, err)
	}
	if raw := ck.Meta[checkpoint.MetaConfig]; raw != "" {
		var own config.RunConfig
		if err := json.Unmarshal([]byte(raw), &own); err == nil && own.Validate() == nil {
			cfg.Model = own.Model
		}
	}
	tr, err := a.Backend.New(ctx, cfg, ds, ck)
	if err != nil {
		return market.Report{}, classify(what, err)
	}
	defer tr.Close()
	rep, err := tr.Backtest(ctx, ds, ds.Valid)
	if err != nil {
		return market.Report{}, classify(fmt.Sprintf("%s: backtest", what), err)
	}
	return rep, nil
}
