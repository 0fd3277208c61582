package metadata

import (
	"encoding/json"
	"time"
)

// Run is one training run, a row of runs.
type Run struct {
	// RunID is the run's key: its TrainingRun workflow id or, when an
	// earlier run used that workflow id, "<workflow id>.<execution id>".
	RunID string `json:"run_id" db:"run_id"`
	// WorkflowID and ExecutionID are the TrainingRun workflow id and the
	// Temporal run id of the run's first execution (empty for runs
	// recorded before executions were; a Continue-As-New keeps both).
	WorkflowID  string `json:"workflow_id" db:"workflow_id"`
	ExecutionID string `json:"execution_id,omitempty" db:"execution_id"`
	Lineage     string `json:"lineage" db:"lineage"`
	ParentRunID string `json:"parent_run_id,omitempty" db:"parent_run_id"`
	// Config is the RunConfig that ran, defaults filled in, as JSON.
	Config json.RawMessage `json:"config" db:"config"`
	Status Status          `json:"status" db:"status"`
	// Backend, Device and Precision are what the trainer reported it ran
	// (trainer.Info); empty until SetRunDevice.
	Backend         string     `json:"backend,omitempty" db:"backend"`
	Device          string     `json:"device,omitempty" db:"device"`
	Precision       string     `json:"precision,omitempty" db:"precision"`
	EpochsDone      int        `json:"epochs_done" db:"epochs_done"`
	BestEpoch       *int       `json:"best_epoch,omitempty" db:"best_epoch"`
	BestValidSharpe *float64   `json:"best_valid_sharpe,omitempty" db:"best_valid_sharpe"`
	Error           string     `json:"error,omitempty" db:"error"`
	CreatedAt       time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at" db:"updated_at"`
	FinishedAt      *time.Time `json:"finished_at,omitempty" db:"finished_at"`
}

// NewRun is what CreateRun needs to know about a run.
type NewRun struct {
	// RunID is the TrainingRun workflow id.
	RunID string
	// ExecutionID is the Temporal run id of the run's first execution
	// (workflow.Info.FirstRunID); empty records the run under RunID alone,
	// as before executions were recorded.
	ExecutionID string
	// Lineage names the retraining lineage; empty starts a new lineage named
	// after RunID.
	Lineage string
	// ParentRunID is the run a retrain warm-starts from; it must exist.
	ParentRunID string
	// Config is the RunConfig that runs, defaults filled in, as a JSON object.
	Config json.RawMessage
}
