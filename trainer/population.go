package trainer

import (
	"context"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// Population is N agents trained in one step (issue 47, ADR 0047): each
// member has its own weights, optimiser state, target network, spectral
// vectors, replay buffer, environments, random streams and the settings
// config.PopulationMemberFields lets differ; all share the network shape,
// the batch size, the dataset and the calls. Member k computes the same
// bits as the Trainer its backend's Backend.New makes for its config on
// the same dataset, driven by the same calls.
//
// Every call but Snapshot works on all live members at once, so that a
// backend with batched kernels pays one launch chain for the population.
// A member whose call fails with an error wrapping ErrNonFinite (a NaN or
// Inf loss, gradient or weight) stops alone: Stopped records that error,
// the very error its single Trainer would have returned, and every later
// call skips the member; the others go on, their bits unchanged by it. A
// call's own error (a cancelled context, a device failure, a bug) is
// about the population: after it, as after a Trainer's error, no state is
// to be trusted, and the caller resumes from its last snapshots.
//
// The slices a call returns have one entry per member, in the order of
// the configs; a member stopped before or during the call has the zero
// value there. Methods are not safe for concurrent use.
type Population interface {
	// Info reports the backend, device and precision that run, which are
	// the same for every member; Parameters counts one member's network.
	Info() Info
	// Len is the number of members, live and stopped.
	Len() int
	// Stopped reports, for each member, the error that stopped it, or
	// nil while it is live.
	Stopped() []error
	// Collect runs Trainer.Collect(ctx, steps) for every live member.
	Collect(ctx context.Context, steps int) ([]CollectStats, error)
	// Train runs Trainer.Train(ctx, steps) for every live member.
	// progress, if not nil, is called for each member as Trainer.Train
	// would call it, with the member's index.
	Train(ctx context.Context, steps int, progress func(member int, p Progress)) ([]TrainStats, error)
	// SyncTarget runs Trainer.SyncTarget for every live member, each with
	// its own optim.target_tau.
	SyncTarget() error
	// Backtest runs every live member's greedy policy over bars r of ds.
	Backtest(ctx context.Context, ds *market.Dataset, r market.Range) ([]sim.Report, error)
	// Snapshot copies member k's state, the checkpoint its single
	// Trainer's Snapshot would write, which Backend.Restore restores
	// alone and PopulationBackend.RestorePopulation with others. A
	// stopped member has no state worth resuming: its Snapshot returns
	// an error wrapping the reason it stopped.
	Snapshot(member int) (*checkpoint.Checkpoint, error)
	// Close frees every member's memory; the population is unusable
	// afterwards.
	Close() error
}

// PopulationBackend creates populations of one kind of trainer.
type PopulationBackend interface {
	// NewPopulation builds a population of len(cfgs) members on ds,
	// member k for cfgs[k], as Backend.New would with warm[k]. warm is
	// nil or has one entry a member, each nil or a warm start. The
	// configs must pass config.ValidatePopulation; an error about one
	// member names it.
	NewPopulation(ctx context.Context, cfgs []config.RunConfig, ds *market.Dataset, warm []*checkpoint.Checkpoint) (Population, error)
	// RestorePopulation rebuilds a population from its members'
	// checkpoints (Population.Snapshot, or Trainer.Snapshot of runs whose
	// configs pass config.ValidatePopulation), exactly: continuing it
	// gives the same bits as never having stopped.
	RestorePopulation(ctx context.Context, cks []*checkpoint.Checkpoint, ds *market.Dataset) (Population, error)
}
