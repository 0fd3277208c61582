package metadata

import (
	"time"
)

// Promotion is the decision of one Retrain: whether its challenger run
// replaces the lineage's incumbent champion. Both are scored on the same
// validation window.
type Promotion struct {
	ID      int64  `json:"id" db:"id"`
	Lineage string `json:"lineage" db:"lineage"`
	// RetrainRunID is the Retrain workflow id: one decision per retrain.
	RetrainRunID            string   `json:"retrain_run_id" db:"retrain_run_id"`
	ChallengerRunID         string   `json:"challenger_run_id" db:"challenger_run_id"`
	ChallengerCheckpointURI string   `json:"challenger_checkpoint_uri" db:"challenger_checkpoint_uri"`
	ChallengerScore         *float64 `json:"challenger_score,omitempty" db:"challenger_score"`
	// The incumbent fields are empty when the lineage had no champion.
	IncumbentRunID         string    `json:"incumbent_run_id,omitempty" db:"incumbent_run_id"`
	IncumbentCheckpointURI string    `json:"incumbent_checkpoint_uri,omitempty" db:"incumbent_checkpoint_uri"`
	IncumbentScore         *float64  `json:"incumbent_score,omitempty" db:"incumbent_score"`
	Promoted               bool      `json:"promoted" db:"promoted"`
	Reason                 string    `json:"reason,omitempty" db:"reason"`
	DecidedAt              time.Time `json:"decided_at" db:"decided_at"`
}

// Champion is the run whose weights a lineage currently serves and warm-
// starts its retrains from.
type Champion struct {
	Lineage       string `json:"lineage" db:"lineage"`
	RunID         string `json:"run_id" db:"run_id"`
	CheckpointURI string `json:"checkpoint_uri" db:"checkpoint_uri"`
	// CheckpointSHA256, CheckpointEpoch and CheckpointStep describe the
	// checkpoint row at CheckpointURI; the hash is empty when that row is
	// gone, and a reader then relies on the file's own integrity hashes.
	CheckpointSHA256 string   `json:"checkpoint_sha256,omitempty" db:"checkpoint_sha256"`
	CheckpointEpoch  int      `json:"checkpoint_epoch,omitempty" db:"checkpoint_epoch"`
	CheckpointStep   int64    `json:"checkpoint_step,omitempty" db:"checkpoint_step"`
	Score            *float64 `json:"score,omitempty" db:"score"`
	// PromotionID is the promotion that crowned it; 0 for the lineage's first
	// run, champion until a challenger is promoted.
	PromotionID int64     `json:"promotion_id,omitempty" db:"promotion_id"`
	Since       time.Time `json:"since" db:"since"`
}
