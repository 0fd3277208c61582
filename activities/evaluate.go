package activities

import (
	"context"
	"fmt"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// EvaluateInput asks for greedy backtests of several checkpoints on the
// validation range of Config's data window.
type EvaluateInput struct {
	Config      config.RunConfig `json:"config"`
	Checkpoints []CheckpointRef  `json:"checkpoints"`
}

// EvaluateOutput holds one report per checkpoint, in input order.
type EvaluateOutput struct {
	Reports []sim.Report `json:"reports"`
}

// EvaluateCheckpoints backtests every checkpoint on the same bars, the
// validation range of in.Config's data window, so that their scores
// compare: Retrain uses it to judge a challenger against the incumbent.
// Every checkpoint trades the contract market.TradedInstrument sizes for
// that range (ADR 0036), whatever instrument its own run stored.
// Each checkpoint's greedy policy is loaded through trainer/policy, the
// one path for checkpoints of any backend and precision: its own config
// gives the model (an incumbent trained with another architecture still
// loads) and the precision, and it runs on this worker's CPU, with no
// trainer built and no device memory used. With data.series the bars are
// the panel's (market.PreparePanel) and each report is the equal-risk
// portfolio of the checkpoint's validation backtests on every series
// (sim.PanelValidation, PanelScore.Report), the score a panel run's
// epochs were chosen on.
func (a *Trainer) EvaluateCheckpoints(ctx context.Context, in EvaluateInput) (EvaluateOutput, error) {
	if err := in.Config.Validate(); err != nil {
		return EvaluateOutput{}, classify("evaluate checkpoints", err)
	}
	_, stop := a.beat(ctx, Heartbeat{Stage: "evaluate"})
	defer stop()
	ds, pn, err := a.prepareRun(ctx, in.Config)
	if err != nil {
		return EvaluateOutput{}, dataError("evaluate checkpoints", in.Config, err)
	}
	out := EvaluateOutput{Reports: make([]sim.Report, 0, len(in.Checkpoints))}
	for _, ref := range in.Checkpoints {
		rep, err := a.evaluate(ctx, ds, pn, ref)
		if err != nil {
			return EvaluateOutput{}, err
		}
		out.Reports = append(out.Reports, rep)
	}
	return out, nil
}

func (a *Trainer) evaluate(ctx context.Context, ds *market.Dataset, pn *market.Panel, ref CheckpointRef) (sim.Report, error) {
	what := "evaluate " + ref.URI
	ck, err := a.read(ctx, ref)
	if err != nil {
		return sim.Report{}, readError(what, err)
	}
	bt := func(d *market.Dataset, r market.Range) (sim.Report, error) { return a.Evaluate(ck, d, r) }
	if a.Evaluate == nil {
		pol, err := policy.Load(ck)
		if err != nil {
			return sim.Report{}, classify(what, err)
		}
		bt = pol.Backtest
	}
	var rep sim.Report
	if pn != nil {
		var sc sim.PanelScore
		sc, err = sim.PanelValidation(bt, pn.Names(), pn.Parts)
		rep = sc.Report()
	} else {
		rep, err = bt(ds, ds.Valid)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return sim.Report{}, classify(fmt.Sprintf("%s: backtest", what), err)
	}
	return rep, nil
}
