package localrun

import (
	"context"
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// ReadCheckpoint loads and verifies the checkpoint file at path with opt
// (size limit, key). It must hold every tensor of its model
// (trainer.CheckComplete); checkpoint.Read has refused NaN and Inf.
func ReadCheckpoint(ctx context.Context, path string, opt checkpoint.Options) (*checkpoint.Checkpoint, error) {
	ck, _, err := checkpoint.Read(ctx, path, opt)
	if err != nil {
		return nil, err
	}
	if err := trainer.CheckComplete(ck); err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	return ck, nil
}

// LoadPolicy reads the checkpoint file at path, with the options opts
// gives, and loads its greedy policy.
func LoadPolicy(ctx context.Context, opts func() (checkpoint.Options, error), path string) (*policy.Policy, error) {
	opt, err := opts()
	if err != nil {
		return nil, err
	}
	ck, err := ReadCheckpoint(ctx, path, opt)
	if err != nil {
		return nil, err
	}
	pol, err := policy.Load(ck)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return pol, nil
}

// flatPolicy stays flat: what a run that abstains recommends.
type flatPolicy struct{}

// Act returns flat.
func (flatPolicy) Act(int, []float32) market.Action { return market.Action{Dir: model.FlatDir} }

// FlatTest is flat's backtest of ds's test range: the report of a run that
// abstains.
func FlatTest(ds *market.Dataset) (sim.Report, error) {
	rep, err := sim.Backtest(ds, ds.Test, flatPolicy{})
	if err != nil {
		return rep, fmt.Errorf("test backtest of flat: %w", err)
	}
	return rep, nil
}
