package metadata

import (
	"encoding/json"
	"time"
)

// Backtest splits with a meaning to the store. Other names are free for
// other data ranges (a retrain's comparison window, say).
const (
	// SplitValid is the validation range: its Sharpe ratio is the score that
	// ranks checkpoints, marks the best one and drives early stopping.
	SplitValid = "valid"
	SplitTest  = "test"
)

// BacktestRecord is one greedy backtest of a run's weights at an epoch on a
// data range.
type BacktestRecord struct {
	ID    int64  `json:"id" db:"id"`
	RunID string `json:"run_id" db:"run_id"`
	Epoch int    `json:"epoch" db:"epoch"`
	Split string `json:"split" db:"split"`
	// CheckpointID is the checkpoint of the same run and epoch, if one is
	// recorded; RecordBacktest fills it in when left nil.
	CheckpointID *int64    `json:"checkpoint_id,omitempty" db:"checkpoint_id"`
	DataFrom     time.Time `json:"data_from" db:"data_from"` // first bar's time
	DataTo       time.Time `json:"data_to" db:"data_to"`     // last bar's time
	// Report is the full report (sim.Report) as a JSON object.
	Report      json.RawMessage `json:"report,omitempty" db:"report"`
	Sharpe      *float64        `json:"sharpe,omitempty" db:"sharpe"` // nil when undefined (no variance)
	TotalReturn float64         `json:"total_return" db:"total_return"`
	MaxDrawdown float64         `json:"max_drawdown" db:"max_drawdown"`
	CreatedAt   time.Time       `json:"created_at" db:"created_at"`
}
