package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Task queues. Workflows and the control activities run on ControlTaskQueue;
// trainer work runs on GPUTaskQueue, inside Temporal sessions, so that a
// run's activities reach the worker that holds its trainer and a GPU worker
// takes no more runs than it has slots.
const (
	ControlTaskQueue = "dqnflow-control"
	GPUTaskQueue     = "dqnflow-gpu"
)

// Workflow type names, as registered and as the UI and the CLI start them.
const (
	TrainingRunName = "TrainingRun"
	RetrainName     = "Retrain"
	SweepName       = "Sweep"
)

// Options tune the workflows. They are part of the workflow code: every
// worker serving ControlTaskQueue must use the same values, or a replay on
// another worker may take another path. The zero value of a field means its
// default (DefaultOptions).
type Options struct {
	// GPUTaskQueue is where sessions are created. Default GPUTaskQueue.
	GPUTaskQueue string
	// ControlTaskQueue is where the control activities and child workflows
	// run. Default ControlTaskQueue.
	ControlTaskQueue string

	// SessionCreationTimeout bounds one attempt to create a session: how
	// long the request waits for a GPU worker with a free slot. Default 2 min.
	SessionCreationTimeout time.Duration
	// SessionWaitLimit bounds the total time a run waits for a GPU worker,
	// over attempts spaced by a growing backoff, before it fails with an
	// error that says no GPU worker took it. Default 24 h (a run may queue
	// behind others for a free slot).
	SessionWaitLimit time.Duration
	// SessionHeartbeatTimeout is how quickly a dead GPU worker is noticed:
	// its session fails and the run recovers elsewhere. Default 3 s. The
	// SDK heartbeats a session every third of it, straight to the server
	// (no batching) and retrying within that third, so a live worker must
	// miss two beats in a row, each of 1 s, to be taken for dead: Go's
	// scheduler preempts every 10 ms and GC pauses are sub-millisecond, so
	// only a server or network that stalls for 2 s does that
	// (TestNoFalseAlarmOnALoadedMachine; docs/reliability.md).
	SessionHeartbeatTimeout time.Duration
	// SessionExecutionTimeout is the longest a session may live; a longer
	// run recovers into a new one. Default 7 days.
	SessionExecutionTimeout time.Duration
	// RecreateTimeout bounds the attempt to get back the previous worker
	// (after a Continue-As-New or a pause) before any worker is accepted.
	// Default 30 s.
	RecreateTimeout time.Duration

	// HeartbeatTimeout of the long session activities (Collect, TrainEpoch,
	// Checkpoint, Backtest, OpenTrainer). Default 20 s.
	HeartbeatTimeout time.Duration
	// EpochTimeout bounds one Collect or TrainEpoch. Default 6 h.
	EpochTimeout time.Duration

	// MaxRecoveries is how many times in a row a run may lose its trainer
	// (worker lost, session failed, step failed) without getting past the
	// furthest epoch it reached, before it fails. Default 5.
	MaxRecoveries int
	// ContinueAsNewEvery continues the run as new after this many epochs in
	// one workflow run; 0 leaves it to the server's suggestion and
	// HistoryLimit. The continuation always follows a checkpoint.
	ContinueAsNewEvery int
	// HistoryLimit continues the run as new once its history has this many
	// events. Default 10000.
	HistoryLimit int
	// HistorySizeLimit continues a run that trains in chunks (ADR 0010) as
	// new once its history has this many bytes: a chunk's result records
	// every epoch, about 1 kB each, so a long run reaches Temporal's
	// size warning (10 MB) long before HistoryLimit's events. Default
	// 4 MiB.
	HistorySizeLimit int

	// ControlTimeout bounds each control activity (store writes, retention,
	// champion look-up) over all its retries: a metadata store that stays
	// unreachable fails the run with ErrTypeControlTimeout after this long,
	// instead of keeping its GPU slot for ever. Default 30 min.
	ControlTimeout time.Duration

	// ChunkBudget is the wall time of a chunk of epochs in one RunEpochs
	// activity (ADR 0010): the chunk starts no epoch after it. It bounds
	// how stale the workflow's state (the progress query, the search
	// attributes) may be and how long a pause or stop signal waits, plus
	// one epoch. Default 2 s: about 40 GPU epochs of 47 ms share one round
	// trip to the server.
	ChunkBudget time.Duration

	// SearchAttributesEvery is the least workflow time between two upserts
	// of a run's search attributes while its status stays the same: with
	// GPU epochs of tens of milliseconds an upsert per epoch would be most
	// of the run's history and a visibility write each time. A status
	// change is published at once. Default 5 s.
	SearchAttributesEvery time.Duration
}

// DefaultOptions returns the options used where a field is zero.
func DefaultOptions() Options {
	return Options{
		GPUTaskQueue:            GPUTaskQueue,
		ControlTaskQueue:        ControlTaskQueue,
		SessionCreationTimeout:  2 * time.Minute,
		SessionWaitLimit:        24 * time.Hour,
		SessionHeartbeatTimeout: 3 * time.Second,
		SessionExecutionTimeout: 7 * 24 * time.Hour,
		RecreateTimeout:         30 * time.Second,
		HeartbeatTimeout:        20 * time.Second,
		EpochTimeout:            6 * time.Hour,
		MaxRecoveries:           5,
		HistoryLimit:            10000,
		HistorySizeLimit:        4 << 20,
		ControlTimeout:          30 * time.Minute,
		SearchAttributesEvery:   5 * time.Second,
		ChunkBudget:             2 * time.Second,
	}
}

// WithDefaults returns o with its zero fields filled from DefaultOptions:
// the options the workflows run with. It is the one derivation of them;
// the workflows and worker.New both use it, so every worker that serves
// ControlTaskQueue with the same Options takes the same decisions.
func (o Options) WithDefaults() Options {
	d := DefaultOptions()
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if o.GPUTaskQueue == "" {
		o.GPUTaskQueue = d.GPUTaskQueue
	}
	if o.ControlTaskQueue == "" {
		o.ControlTaskQueue = d.ControlTaskQueue
	}
	set(&o.SessionCreationTimeout, d.SessionCreationTimeout)
	set(&o.SessionWaitLimit, d.SessionWaitLimit)
	set(&o.SessionHeartbeatTimeout, d.SessionHeartbeatTimeout)
	set(&o.SessionExecutionTimeout, d.SessionExecutionTimeout)
	set(&o.RecreateTimeout, d.RecreateTimeout)
	set(&o.HeartbeatTimeout, d.HeartbeatTimeout)
	set(&o.EpochTimeout, d.EpochTimeout)
	set(&o.ControlTimeout, d.ControlTimeout)
	set(&o.SearchAttributesEvery, d.SearchAttributesEvery)
	set(&o.ChunkBudget, d.ChunkBudget)
	if o.MaxRecoveries <= 0 {
		o.MaxRecoveries = d.MaxRecoveries
	}
	if o.HistoryLimit <= 0 {
		o.HistoryLimit = d.HistoryLimit
	}
	if o.HistorySizeLimit <= 0 {
		o.HistorySizeLimit = d.HistorySizeLimit
	}
	return o
}

// controlCtx is the context for control activities: short, retried with
// backoff (a short database outage pauses the run, it does not fail it) for
// at most ControlTimeout in all; the store's own non-retryable errors end
// the retries at once.
func (o Options) controlCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              o.ControlTaskQueue,
		ScheduleToCloseTimeout: o.ControlTimeout,
		StartToCloseTimeout:    time.Minute,
		RetryPolicy:            controlRetry(),
	})
}

// controlRetry is the retry policy of the control activities (and of
// WalkForwardPlan): backoff from a second to a minute, bounded by the
// activity's ScheduleToCloseTimeout.
func controlRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute}
}

// stepCtx is the context for the stateful session activities (Collect,
// TrainEpoch, SyncTarget, RunEpochs): a single attempt, because a step that failed
// part-way is redone from the last checkpoint, never retried in place.
func (o Options) stepCtx(sess workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(sess, workflow.ActivityOptions{
		StartToCloseTimeout: o.EpochTimeout,
		HeartbeatTimeout:    o.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// sessionCtx is the context for the session activities that are safe to
// retry in place (OpenTrainer, Checkpoint, Backtest, EvaluateCheckpoints,
// WalkForwardWindow, whose window reruns whole):
// a few attempts for a transient file or database error.
func (o Options) sessionCtx(sess workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(sess, workflow.ActivityOptions{
		StartToCloseTimeout: o.EpochTimeout,
		HeartbeatTimeout:    o.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    3,
		},
	})
}

// closeCtx is the context for CloseTrainer: two attempts within two
// minutes, since a clean-up must not hold up the end of a run (the worker
// evicts a trainer it was not told to close).
func (o Options) closeCtx(sess workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(sess, workflow.ActivityOptions{
		ScheduleToCloseTimeout: 2 * time.Minute,
		StartToCloseTimeout:    time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 2},
	})
}
