package activities

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
)

// Stage is a step of an epoch. An epoch runs collect, then train, then sync;
// StageSynced is also the stage of a trainer just built or restored (its
// epoch is complete).
type Stage int

// The stages of an epoch, in order.
const (
	StageCollected Stage = iota + 1
	StageTrained
	StageSynced
)

func (s Stage) String() string {
	switch s {
	case StageCollected:
		return "collected"
	case StageTrained:
		return "trained"
	case StageSynced:
		return "synced"
	}
	return fmt.Sprintf("stage(%d)", int(s))
}

// Run is one training run's live state on a worker: its trainer and
// dataset, and how far the trainer has gone. A worker's Registry holds one
// Run per run id between activities, so that the activities of an epoch,
// and the next run after a Continue-As-New, find the trainer in memory.
//
// Epoch and Stage record the last step that completed on Trainer. They make
// the stateful steps idempotent: a step asked for again after it completed
// (a retry whose first result was lost) returns its recorded result without
// running, and a step that does not follow the recorded one is refused with
// ErrTypeTrainerLost, because the trainer's state is not what the workflow
// expects. A step that fails part-way leaves the trainer in an unknown state,
// so the activity closes it and the workflow restores the last checkpoint.
//
// A Run is used under its lock (Lock, Unlock): one activity at a time.
type Run struct {
	ID string
	// ExecutionID is the first execution of the run's workflow (OpenInput);
	// it keys the checkpoint directory with ID.
	ExecutionID string
	Config      config.RunConfig
	Trainer     trainer.Trainer
	Dataset     *market.Dataset
	// Panel is the run's panel when its config names data.series (nil for
	// one series): Dataset is then its joined training set, and the
	// validation backtest is the equal-risk portfolio of the series' own
	// (sim.PanelValidation).
	Panel *market.Panel
	Info  trainer.Info
	// Device names the worker's device the trainer lives on
	// (trainer.Device.Name; empty on a worker with one unnamed device).
	Device string
	// NotBitExact says why the run is no longer bit-identical to an
	// uninterrupted one (trainer.ResumeExactness); "" while it is. Every
	// later checkpoint carries it (checkpoint.MetaNotBitExact).
	NotBitExact string

	Epoch      int   // epoch of the last completed step
	Stage      Stage // last completed step of Epoch
	GlobalStep int64 // gradient steps since the run began

	opened int          // epoch at which the trainer was built or restored
	chunk  *chunkResult // the last chunk RunEpochs completed

	lock     chan struct{}
	closed   bool
	lastUsed atomic.Int64 // unix nanoseconds of the last Unlock
}

// NewRun returns a Run for a trainer whose epoch epoch is complete.
func NewRun(id string, cfg config.RunConfig, tr trainer.Trainer, ds *market.Dataset, epoch int, globalStep int64) *Run {
	r := &Run{
		ID: id, Config: cfg, Trainer: tr, Dataset: ds, Info: tr.Info(),
		Epoch: epoch, Stage: StageSynced, GlobalStep: globalStep,
		opened: epoch, lock: make(chan struct{}, 1),
	}
	r.lastUsed.Store(time.Now().UnixNano())
	return r
}

// Lock waits until the caller has the run to itself, or ctx ends.
func (r *Run) Lock(ctx context.Context) error {
	select {
	case r.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("run %s: wait for the trainer: %w", r.ID, ctx.Err())
	}
}

// TryLock locks the run if it is free and reports whether it did.
func (r *Run) TryLock() bool {
	select {
	case r.lock <- struct{}{}:
		return true
	default:
		return false
	}
}

// Unlock releases the run and records the time as its last use.
func (r *Run) Unlock() {
	r.lastUsed.Store(time.Now().UnixNano())
	<-r.lock
}

// LastUsed is when the run was last unlocked.
func (r *Run) LastUsed() time.Time { return time.Unix(0, r.lastUsed.Load()) }

// Closed reports whether the trainer was closed. Call it under the lock.
func (r *Run) Closed() bool { return r.closed }

// Close frees the trainer; later calls do nothing. Call it under the lock.
func (r *Run) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if err := r.Trainer.Close(); err != nil {
		return fmt.Errorf("run %s: close trainer: %w", r.ID, err)
	}
	return nil
}

func (r *Run) where() string {
	return fmt.Sprintf("epoch %d %s, global step %d", r.Epoch, r.Stage, r.GlobalStep)
}

// Registry holds the live runs of one worker process, by run id. The worker
// package implements it (with idle eviction and close on shutdown).
type Registry interface {
	// Get returns the run held for id, or nil. The run is not locked.
	Get(id string) *Run
	// Put holds run under its id. A different run held under the same id is
	// removed and its trainer closed (after waiting for its lock, or until
	// ctx ends).
	Put(ctx context.Context, run *Run) error
	// Remove forgets run if it is the one held under its id. It does not
	// close the trainer.
	Remove(run *Run)
}

// SlotKeeper is a GPU worker's account of its slots (worker.Slots
// implements it). Hold keeps a run's slot across its Continue-As-New: for
// the next run of workflow workflowID, for d; Release ends the hold once
// that run has its session here. runID is the registry key of the trainer
// kept for it, closed if the hold runs out. Device returns the index, in
// Trainer.Devices, of the device whose slot the session of workflow
// execution workflowID/runID holds.
type SlotKeeper interface {
	Hold(workflowID, runID string, d time.Duration)
	Release(workflowID string)
	Device(workflowID, runID string) (int, bool)
}
