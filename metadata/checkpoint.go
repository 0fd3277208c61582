package metadata

import (
	"time"
)

// CheckpointRecord is the metadata of one checkpoint blob.
type CheckpointRecord struct {
	ID         int64  `json:"id" db:"id"`
	RunID      string `json:"run_id" db:"run_id"`
	Epoch      int    `json:"epoch" db:"epoch"`
	URI        string `json:"uri" db:"uri"`
	SHA256     string `json:"sha256" db:"sha256"` // of the blob, lower-case hex
	Bytes      int64  `json:"bytes" db:"bytes"`
	GlobalStep int64  `json:"global_step" db:"global_step"`
	// Metrics are the epoch's metrics worth keeping with the checkpoint.
	Metrics map[string]float64 `json:"metrics,omitempty" db:"metrics"`
	// ValidSharpe is the validation Sharpe ratio of these weights; nil until
	// a "valid" backtest of the epoch is recorded.
	ValidSharpe *float64 `json:"valid_sharpe,omitempty" db:"valid_sharpe"`
	// IsBest marks the run's unpruned checkpoint with the highest
	// ValidSharpe (the earlier epoch on a tie). The store maintains it.
	IsBest bool `json:"is_best" db:"is_best"`
	// Pruned means the blob was deleted by retention.
	Pruned    bool       `json:"pruned" db:"pruned"`
	PrunedAt  *time.Time `json:"pruned_at,omitempty" db:"pruned_at"`
	CreatedAt time.Time  `json:"created_at" db:"created_at"`
}
