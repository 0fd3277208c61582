package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer"
)

// Application error types of the non-retryable errors the activities
// return. The first six are deterministic: the same input fails the same
// way on every worker, so a workflow ends the run (IsFatal). The others
// describe a trainer or a checkpoint this worker cannot provide; a workflow
// recovers from them by opening the run again, possibly on another worker.
const (
	// ErrTypeInvalidConfig: the RunConfig (or an activity input) is invalid.
	ErrTypeInvalidConfig = "InvalidConfig"
	// ErrTypeNonFinite: training produced a NaN or Inf (trainer.ErrNonFinite).
	ErrTypeNonFinite = "NonFinite"
	// ErrTypeCorruptCheckpoint: a checkpoint file is damaged or does not
	// match its recorded SHA-256 (checkpoint.ErrCorrupt).
	ErrTypeCorruptCheckpoint = "CorruptCheckpoint"
	// ErrTypeIncompatibleCheckpoint: a checkpoint lacks a tensor the model
	// needs or has one of another shape (a warm start from a run with
	// another architecture).
	ErrTypeIncompatibleCheckpoint = "IncompatibleCheckpoint"
	// ErrTypeBadData: the run's price data cannot be loaded or prepared.
	ErrTypeBadData = "BadData"
	// ErrTypeStoreRejected: the metadata store refused a write as invalid or
	// referring to a missing row (metadata.ErrInvalid, metadata.ErrNotFound).
	ErrTypeStoreRejected = "StoreRejected"

	// ErrTypeTrainerLost: this worker does not hold the run's trainer in the
	// state the workflow expects (the worker restarted, the trainer was
	// evicted, or a failed step left it half-updated). Open the run again
	// from its last checkpoint.
	ErrTypeTrainerLost = "TrainerLost"
	// ErrTypeCheckpointMissing: a checkpoint file is not on this worker's
	// file system. Another worker may see it (checkpoint.dir must be shared
	// storage); the workflow recovers on a new session.
	ErrTypeCheckpointMissing = "CheckpointMissing"
	// ErrTypeWorkerStopping: the worker is stopping and ended the chunk
	// (Trainer.Drain) after recording what it had checkpointed; the trainer
	// was discarded. The run recovers on another worker and leaves the
	// session to end with this one.
	ErrTypeWorkerStopping = "WorkerStopping"
)

// IsFatal reports whether err, an activity error as a workflow receives it,
// is a deterministic failure that a retry, another worker or a restore from
// checkpoint would only repeat: invalid config, non-finite training, a
// corrupt or incompatible checkpoint, bad data, or a write the store
// rejects.
func IsFatal(err error) bool {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Type() {
	case ErrTypeInvalidConfig, ErrTypeNonFinite, ErrTypeCorruptCheckpoint, ErrTypeIncompatibleCheckpoint,
		ErrTypeBadData, ErrTypeStoreRejected:
		return true
	}
	return false
}

// nonRetryable wraps err in a non-retryable application error of type typ,
// its message prefixed by what failed and followed by what to do. The text
// may quote whatever the failure read (a file's header, say): the workers'
// interceptor, worker.CleanText, cleans every activity error on its way
// to Temporal (errtext.Clean, ADR 0030), so no error here needs to.
func nonRetryable(typ, what string, err error, todo string) error {
	msg := what + ": " + err.Error()
	if todo != "" {
		msg += "; " + todo
	}
	return temporal.NewNonRetryableApplicationError(msg, typ, err)
}

// classify turns the deterministic failures among err into non-retryable
// errors and returns the others as they are (retryable). what names the
// step that failed, e.g. "run r1 epoch 3: train".
func classify(what string, err error) error {
	var fe *config.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe), errors.Is(err, config.ErrInvalid):
		return nonRetryable(ErrTypeInvalidConfig, what, err, "fix the config and start a new run")
	case errors.Is(err, trainer.ErrUnsupported):
		return nonRetryable(ErrTypeInvalidConfig, what, err, "the workers cannot run this config; change device, precision or blas and start a new run")
	case errors.Is(err, trainer.ErrNonFinite):
		return nonRetryable(ErrTypeNonFinite, what, err,
			"training diverged; lower optim.lr, raise optim.clip_norm or check the data, then start a new run")
	case errors.Is(err, checkpoint.ErrCorrupt):
		return nonRetryable(ErrTypeCorruptCheckpoint, what, err,
			"the file is damaged; restore it from a backup or start from an earlier checkpoint")
	case errors.Is(err, checkpoint.ErrNotFinite): // a write: reads wrap ErrCorrupt
		return nonRetryable(ErrTypeNonFinite, what, err,
			"the trainer's state holds a NaN or Inf, which no checkpoint stores; lower optim.lr or raise optim.clip_norm, then start a new run")
	case errors.Is(err, checkpoint.ErrTooLarge): // a write, likewise
		return nonRetryable(ErrTypeInvalidConfig, what, err,
			"raise --checkpoint-max-bytes on every worker, or lower replay.capacity, and start a new run")
	case errors.Is(err, checkpoint.ErrMissingTensor), errors.Is(err, checkpoint.ErrTensorMismatch):
		return nonRetryable(ErrTypeIncompatibleCheckpoint, what, err,
			"the checkpoint was written for another model; warm-start from a run with the same model section")
	case errors.Is(err, checkpoint.ErrOutsideRoot):
		return nonRetryable(ErrTypeInvalidConfig, what, err,
			"checkpoint.dir must be a path inside the workers' checkpoint root (dqnflow worker --checkpoint-dir); start the run again with one")
	case errors.Is(err, metadata.ErrInvalid), errors.Is(err, metadata.ErrNotFound):
		return nonRetryable(ErrTypeStoreRejected, what, err, "the metadata store refused the write; see the cause")
	}
	return fmt.Errorf("%s: %w", what, err)
}

// trainerLost is the error for a trainer this worker does not hold in the
// expected state.
func trainerLost(runID, why string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("run %s: %s; open the run again from its last checkpoint", runID, why),
		ErrTypeTrainerLost, nil)
}

// workerStopping is the error of a chunk that Drain ended, or refused,
// on a stopping worker; err is what the chunk returned, if anything.
func workerStopping(runID string, err error) error {
	why := ErrWorkerStopping.Error()
	if err != nil {
		why += " (" + err.Error() + ")"
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("run %s: %s; its trainer was discarded, open the run again from its last checkpoint on another worker", runID, why),
		ErrTypeWorkerStopping, err)
}
