package workflows

import (
	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer"
)

// RunState is the second input of TrainingRun: nil for a fresh run (the UI
// sends only the config), the whole state of the run across a
// Continue-As-New, or the starting point that Retrain and Sweep give their
// child runs (Lineage, ParentRunID, Warm).
type RunState struct {
	// RunID is the run's key in the store, set by the workflow: its
	// TrainingRun workflow id, or "<workflow id>.<execution id>" when an
	// earlier run used that workflow id (the store decides, RecordRun).
	RunID string `json:"run_id,omitempty"`
	// ExecutionID is the Temporal run id of the run's first execution,
	// kept across Continue-As-New; it keys the run's store rows and
	// checkpoint directory with RunID. Empty for runs started before it.
	ExecutionID string `json:"execution_id,omitempty"`
	// Lineage groups the runs that retrain one model; empty starts a new
	// lineage named after the run.
	Lineage string `json:"lineage,omitempty"`
	// ParentRunID is the run whose weights Warm holds.
	ParentRunID string `json:"parent_run_id,omitempty"`
	// Warm warm-starts the run's first trainer from these weights.
	Warm *activities.CheckpointRef `json:"warm,omitempty"`

	// Recorded is true once the run's row exists in the store.
	Recorded bool `json:"recorded,omitempty"`
	// Epoch is the last epoch whose results are committed (trained and,
	// where due, checkpointed and backtested); GlobalStep its gradient step.
	Epoch      int   `json:"epoch"`
	GlobalStep int64 `json:"global_step"`
	// Loss is the mean training loss of Epoch.
	Loss float64 `json:"loss,omitempty"`
	// LastCheckpoint is the newest committed checkpoint: where a recovery
	// restarts. Nil before the first.
	LastCheckpoint *activities.CheckpointRef `json:"last_checkpoint,omitempty"`
	// Scores are the validation results so far; ScoresAtCheckpoint are
	// those committed with LastCheckpoint, restored with it on a recovery
	// so that redone backtests are not counted twice against the patience.
	Scores             Scores `json:"scores"`
	ScoresAtCheckpoint Scores `json:"scores_at_checkpoint"`
	// SessionToken recreates the session on the worker that held the run's
	// trainer (after a Continue-As-New or a pause).
	SessionToken []byte `json:"session_token,omitempty"`
	// Status is the run's status as last recorded.
	Status metadata.Status `json:"status,omitempty"`
	// Info is what the trainer reported it runs on.
	Info trainer.Info `json:"info"`
	// Recoveries counts the trainer losses since the run last got past
	// Furthest, the furthest epoch it has committed.
	Recoveries int `json:"recoveries,omitempty"`
	Furthest   int `json:"furthest,omitempty"`
	// PauseRequested and StopRequested carry signals received but not yet
	// acted on across a Continue-As-New.
	PauseRequested bool `json:"pause_requested,omitempty"`
	StopRequested  bool `json:"stop_requested,omitempty"`
}

// Scores track validation backtests for best-checkpoint selection and early
// stopping; RunEpochs applies the same rules (activities.Scores).
type Scores = activities.Scores

// RunResult is what TrainingRun returns.
type RunResult struct {
	RunID   string          `json:"run_id"`
	Lineage string          `json:"lineage"`
	Status  metadata.Status `json:"status"` // completed, stopped or early_stopped
	// Epochs is the number of epochs trained.
	Epochs          int                       `json:"epochs"`
	GlobalStep      int64                     `json:"global_step"`
	BestEpoch       int                       `json:"best_epoch"`
	BestValidSharpe float64                   `json:"best_valid_sharpe"`
	BestCheckpoint  *activities.CheckpointRef `json:"best_checkpoint,omitempty"`
	LastCheckpoint  *activities.CheckpointRef `json:"last_checkpoint,omitempty"`
	// Recommendation is what the run recommends doing with its best
	// checkpoint, as recorded in it (ADR 0016); nil without a best
	// checkpoint, or when it could not be recorded.
	Recommendation *checkpoint.Recommendation `json:"recommendation,omitempty"`
	Info           trainer.Info               `json:"info"`
	Recoveries     int                        `json:"recoveries"`
}

// ProgressQuery is the name of TrainingRun's query handler; it returns a
// Progress.
const ProgressQuery = "progress"

// Signal names TrainingRun listens to. They carry no payload (one is
// ignored) and take effect at the next epoch boundary.
const (
	// PauseSignal checkpoints and backtests the current epoch, frees the GPU
	// slot and the trainer, and waits for ResumeSignal or StopSignal.
	PauseSignal = "pause"
	// ResumeSignal continues a paused run, on its previous worker if it has
	// a free slot, else on any.
	ResumeSignal = "resume"
	// StopSignal ends the run after a final checkpoint and backtest, with
	// status stopped.
	StopSignal = "stop"
)

// Progress is the answer to ProgressQuery: where the run stands, as far as
// the workflow knows (Step and Loss are those of the last completed
// TrainEpoch; the pending activity's heartbeat has the live values).
type Progress struct {
	RunID           string                    `json:"run_id"`
	Lineage         string                    `json:"lineage"`
	Status          metadata.Status           `json:"status"`
	Phase           string                    `json:"phase"` // what the run is doing now
	Epoch           int                       `json:"epoch"` // last completed epoch
	Epochs          int                       `json:"epochs"`
	Step            int64                     `json:"step"` // global gradient step
	Loss            float64                   `json:"loss"`
	BestEpoch       int                       `json:"best_epoch"`
	BestValidSharpe float64                   `json:"best_valid_sharpe"`
	LastValidSharpe float64                   `json:"last_valid_sharpe"`
	LastCheckpoint  *activities.CheckpointRef `json:"last_checkpoint,omitempty"`
	Backend         string                    `json:"backend,omitempty"`
	Device          string                    `json:"device,omitempty"`
	Precision       string                    `json:"precision,omitempty"`
	Host            string                    `json:"host,omitempty"`
	Recoveries      int                       `json:"recoveries"`
}
