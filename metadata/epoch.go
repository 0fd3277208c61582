package metadata

import (
	"time"
)

// EpochMetrics are one epoch's results.
type EpochMetrics struct {
	Loss       float64 `json:"loss" db:"loss"`           // mean training loss of the epoch
	GradNorm   float64 `json:"grad_norm" db:"grad_norm"` // mean global gradient norm, before clipping
	EnvSteps   int64   `json:"env_steps" db:"env_steps"` // environment steps since the run began
	GlobalStep int64   `json:"global_step" db:"global_step"`
	// ValidSharpe is the validation Sharpe ratio when a validation backtest
	// ran this epoch; nil otherwise. RecordBacktest fills it in later.
	ValidSharpe *float64 `json:"valid_sharpe,omitempty" db:"valid_sharpe"`
	DurationMS  int64    `json:"duration_ms" db:"duration_ms"`
	// Metrics holds every other number worth keeping (epsilon, mean reward,
	// buffer size, steps per second...).
	Metrics map[string]float64 `json:"metrics,omitempty" db:"metrics"`
}

// Epoch is a recorded epoch.
type Epoch struct {
	RunID string `json:"run_id" db:"run_id"`
	Epoch int    `json:"epoch" db:"epoch"`
	EpochMetrics
	RecordedAt time.Time `json:"recorded_at" db:"recorded_at"`
}
