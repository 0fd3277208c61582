package cpu

import (
	"context"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
)

// NewPopulation builds a population whose members are this backend's
// trainers, run one after the other (trainer.NewLoop): member k is the
// Trainer New makes for cfgs[k], so it computes that trainer's bits. The
// CPU has no launches to share; what a population saves here is only the
// driver's round trips. See trainer.PopulationBackend.
func (b Backend) NewPopulation(ctx context.Context, cfgs []config.RunConfig, ds *market.Dataset, warm []*checkpoint.Checkpoint) (trainer.Population, error) {
	return trainer.NewLoop(ctx, b, cfgs, ds, warm)
}

// RestorePopulation rebuilds a population from its members' checkpoints,
// each member restored by Restore; see trainer.PopulationBackend.
func (b Backend) RestorePopulation(ctx context.Context, cks []*checkpoint.Checkpoint, ds *market.Dataset) (trainer.Population, error) {
	return trainer.RestoreLoop(ctx, b, cks, ds)
}

var _ trainer.PopulationBackend = Backend{}
