// Package epochloop owns the loop of a run's epochs, the one that the
// RunEpochs activity and "dqnflow train" both run: each epoch collects,
// trains and syncs the target network (Steps.Train), backtests on the
// validation range when the config's cadence asks (Due), checkpoints
// when the cadence asks or the backtest does (a new best, and with
// Loop.CheckpointStop the epoch the patience runs out at), and reports
// the epoch (Steps.Done). It keeps the run's validation scores (Scores):
// the best epoch and the patience of early stopping.
//
// How a step is done (the activity's bookkeeping, heartbeats and
// background writes; the CLI's progress bar and files) is the caller's,
// behind Steps; which steps run, in which order, is the loop's.
package epochloop
