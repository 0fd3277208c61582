package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer"
)

// Control holds the light activities that only talk to the metadata store.
// They run on the control task queue, on any worker.
type Control struct {
	Store Store
	// Checkpoints is the GPU workers' checkpoint store as this worker
	// opens it: retention deletes no blob outside it. nil means the
	// working directory.
	Checkpoints *checkpoint.Store
}

// RecordRunInput describes a run as it starts.
type RecordRunInput struct {
	RunID string `json:"run_id"` // the TrainingRun workflow id
	// ExecutionID is the Temporal run id of the run's first execution
	// (metadata.NewRun.ExecutionID).
	ExecutionID string           `json:"execution_id,omitempty"`
	Lineage     string           `json:"lineage,omitempty"`       // empty: the run starts its own lineage
	ParentRunID string           `json:"parent_run_id,omitempty"` // the run it warm-starts from
	Config      config.RunConfig `json:"config"`                  // the config that runs, defaults filled in
}

// RecordRunOutput is the run's key in the store and its lineage.
type RecordRunOutput struct {
	// RunID is the key of the run's rows, which every later activity
	// uses: the workflow id, or "<workflow id>.<execution id>" when an
	// earlier run used that workflow id.
	RunID   string `json:"run_id"`
	Lineage string `json:"lineage"`
}

// RecordRun creates the run's row (or finds it, on a retry or after a
// Continue-As-New) and marks it running. A run under a workflow id that an
// earlier run used gets rows of its own (store.Store.CreateRun).
func (c *Control) RecordRun(ctx context.Context, in RecordRunInput) (RecordRunOutput, error) {
	run, err := c.Store.CreateRun(ctx, metadata.NewRun{
		RunID: in.RunID, ExecutionID: in.ExecutionID, Lineage: in.Lineage, ParentRunID: in.ParentRunID, Config: in.Config.JSON(),
	})
	if err != nil {
		return RecordRunOutput{}, classify("record run "+in.RunID, err)
	}
	if err := c.Store.SetRunStatus(ctx, run.RunID, metadata.StatusRunning, ""); err != nil {
		return RecordRunOutput{}, classify("record run "+run.RunID, err)
	}
	return RecordRunOutput{RunID: run.RunID, Lineage: run.Lineage}, nil
}

// SetStatusInput is a run's new status; Error explains a failure.
type SetStatusInput struct {
	RunID  string          `json:"run_id"`
	Status metadata.Status `json:"status"`
	Error  string          `json:"error,omitempty"`
}

// SetStatusOutput is empty.
type SetStatusOutput struct{}

// SetRunStatus records a run's status.
func (c *Control) SetRunStatus(ctx context.Context, in SetStatusInput) (SetStatusOutput, error) {
	err := c.Store.SetRunStatus(ctx, in.RunID, in.Status, in.Error)
	return SetStatusOutput{}, classify("set status of run "+in.RunID, err)
}

// SetDeviceInput is what a run's trainer really runs on.
type SetDeviceInput struct {
	RunID string       `json:"run_id"`
	Info  trainer.Info `json:"info"`
}

// SetDeviceOutput is empty.
type SetDeviceOutput struct{}

// SetRunDevice records the backend, device and precision that run.
func (c *Control) SetRunDevice(ctx context.Context, in SetDeviceInput) (SetDeviceOutput, error) {
	err := c.Store.SetRunDevice(ctx, in.RunID, in.Info.Backend, in.Info.Device, in.Info.Precision)
	return SetDeviceOutput{}, classify("set device of run "+in.RunID, err)
}

// epochMetrics is the epoch row of a collection and a training that took
// durationMS together; RecordEpoch and RunEpochs write the same row.
func epochMetrics(col trainer.CollectStats, tr trainer.TrainStats, durationMS int64) metadata.EpochMetrics {
	m := metadata.EpochMetrics{
		Loss: tr.Loss, GradNorm: tr.GradNorm,
		EnvSteps: col.EnvSteps, GlobalStep: tr.GlobalStep,
		DurationMS: max(durationMS, 0),
		Metrics: map[string]float64{
			"epsilon":     col.Epsilon,
			"mean_reward": col.MeanReward,
			"buffer_size": float64(col.BufferSize),
			"transitions": float64(col.Transitions),
			"episodes":    float64(col.Episodes),
		},
	}
	if q := tr.MeanQ; q != nil && !math.IsNaN(*q) && !math.IsInf(*q, 0) {
		m.Metrics["mean_q"] = *q
	}
	if g := tr.GradNormMax; g > 0 && !math.IsInf(g, 0) {
		m.Metrics["grad_norm_max"] = g
	}
	if s := tr.Stagnation; s != nil && !math.IsNaN(*s) {
		m.Metrics["stagnation"] = *s
	}
	return m
}

// LeftoversInput names a RunEpochs chunk that failed: the epochs after
// After, up to Until.
type LeftoversInput struct {
	RunID string `json:"run_id"`
	After int    `json:"after"`
	Until int    `json:"until"`
}

// LeftoversOutput is what the failed chunk recorded before it failed: its
// checkpoints (unpruned) and its validation Sharpes, in epoch order.
type LeftoversOutput struct {
	Checkpoints []CheckpointRef `json:"checkpoints"`
	Sharpes     []EpochSharpe   `json:"sharpes"`
}

// EpochSharpe is the validation Sharpe of an epoch.
type EpochSharpe struct {
	Epoch  int     `json:"epoch"`
	Sharpe float64 `json:"sharpe"`
}

// ChunkLeftovers reads, from the store, the checkpoints and validation
// backtests that a failed RunEpochs chunk recorded in epochs
// (in.After, in.Until]: the workflow commits the newest of its
// checkpoints, so that the recovery restores it instead of the one the
// chunk started from (ADR 0010).
func (c *Control) ChunkLeftovers(ctx context.Context, in LeftoversInput) (LeftoversOutput, error) {
	what := fmt.Sprintf("leftovers of run %s after epoch %d", in.RunID, in.After)
	cks, err := c.Store.ListCheckpoints(ctx, in.RunID)
	if err != nil {
		return LeftoversOutput{}, classify(what, err)
	}
	bts, err := c.Store.ListBacktests(ctx, in.RunID)
	if err != nil {
		return LeftoversOutput{}, classify(what, err)
	}
	in0 := func(e int) bool { return e > in.After && e <= in.Until }
	out := LeftoversOutput{Checkpoints: []CheckpointRef{}, Sharpes: []EpochSharpe{}}
	for _, ck := range cks {
		if in0(ck.Epoch) && !ck.Pruned {
			out.Checkpoints = append(out.Checkpoints, CheckpointRef{
				RunID: ck.RunID, URI: ck.URI, SHA256: ck.SHA256, Bytes: ck.Bytes, Epoch: ck.Epoch, GlobalStep: ck.GlobalStep,
			})
		}
	}
	for _, b := range bts {
		if in0(b.Epoch) && b.Split == metadata.SplitValid && b.Sharpe != nil {
			out.Sharpes = append(out.Sharpes, EpochSharpe{Epoch: b.Epoch, Sharpe: *b.Sharpe})
		}
	}
	slices.SortFunc(out.Checkpoints, func(a, b CheckpointRef) int { return a.Epoch - b.Epoch })
	slices.SortFunc(out.Sharpes, func(a, b EpochSharpe) int { return a.Epoch - b.Epoch })
	return out, nil
}

// RetentionInput asks to prune run RunID's checkpoints down to the KeepLast
// newest and the KeepBest best by validation Sharpe. Keep lists URIs that
// must survive whatever the ranking says: the workflow's last and best
// checkpoints, which a resume or a promotion will read.
type RetentionInput struct {
	RunID    string   `json:"run_id"`
	KeepLast int      `json:"keep_last"`
	KeepBest int      `json:"keep_best"`
	Keep     []string `json:"keep,omitempty"`
}

// RetentionOutput lists the checkpoints pruned.
type RetentionOutput struct {
	Pruned []CheckpointRef `json:"pruned"`
}

// ApplyRetention deletes the blobs of the checkpoints retention drops and
// marks them pruned. A blob already gone counts as deleted, so a retry after
// a partial run finishes the job; a missing checkpoint directory is an
// error, because it means this worker does not see the checkpoint storage
// and marking the rows would leak the blobs.
func (c *Control) ApplyRetention(ctx context.Context, in RetentionInput) (RetentionOutput, error) {
	what := "retention of run " + in.RunID
	drop, err := c.Store.Retention(ctx, in.RunID, in.KeepLast, in.KeepBest)
	if err != nil {
		return RetentionOutput{}, classify(what, err)
	}
	keep := make(map[string]bool, len(in.Keep))
	for _, u := range in.Keep {
		keep[u] = true
	}
	out := RetentionOutput{Pruned: []CheckpointRef{}}
	var ids []int64
	for _, ck := range drop {
		if keep[ck.URI] {
			continue
		}
		if err := c.checkpoints().Delete(ctx, ck.URI); err != nil {
			if errors.Is(err, checkpoint.ErrOutsideRoot) {
				return RetentionOutput{}, nonRetryable(ErrTypeStoreRejected, what, err,
					"nothing outside the checkpoint store is deleted; give the control worker the GPU workers' --checkpoint-store")
			}
			return RetentionOutput{}, fmt.Errorf("%s: %w", what, err)
		}
		ids = append(ids, ck.ID)
		out.Pruned = append(out.Pruned, CheckpointRef{
			RunID: ck.RunID, URI: ck.URI, SHA256: ck.SHA256, Bytes: ck.Bytes, Epoch: ck.Epoch, GlobalStep: ck.GlobalStep,
		})
	}
	if err := c.Store.MarkPruned(ctx, ids); err != nil {
		return RetentionOutput{}, classify(what, err)
	}
	return out, nil
}

// checkpoints is the worker's checkpoint store.
func (c *Control) checkpoints() *checkpoint.Store {
	if c.Checkpoints == nil {
		return checkpoint.Local("")
	}
	return c.Checkpoints
}

// ChampionInput names a lineage.
type ChampionInput struct {
	Lineage string `json:"lineage"`
}

// ChampionOutput is the lineage's champion; Found is false when the lineage
// has none yet.
type ChampionOutput struct {
	Found      bool          `json:"found"`
	RunID      string        `json:"run_id,omitempty"`
	Checkpoint CheckpointRef `json:"checkpoint"`
	Score      *float64      `json:"score,omitempty"` // validation Sharpe when it was crowned
}

// LookupChampion returns the lineage's champion run and checkpoint.
func (c *Control) LookupChampion(ctx context.Context, in ChampionInput) (ChampionOutput, error) {
	ch, err := c.Store.Champion(ctx, in.Lineage)
	if errors.Is(err, metadata.ErrNotFound) {
		return ChampionOutput{}, nil
	}
	if err != nil {
		return ChampionOutput{}, classify("champion of lineage "+in.Lineage, err)
	}
	return ChampionOutput{
		Found: true, RunID: ch.RunID, Score: ch.Score,
		Checkpoint: CheckpointRef{
			RunID: ch.RunID, URI: ch.CheckpointURI, SHA256: ch.CheckpointSHA256,
			Epoch: ch.CheckpointEpoch, GlobalStep: ch.CheckpointStep,
		},
	}, nil
}

// PromotionInput is a retrain's decision. Scores are validation Sharpe
// ratios on the same window; Incumbent is nil when the lineage had no
// champion.
type PromotionInput struct {
	RetrainID       string         `json:"retrain_id"` // the Retrain execution: "<workflow id>/<run id>"
	Lineage         string         `json:"lineage"`
	Challenger      CheckpointRef  `json:"challenger"`
	ChallengerScore *float64       `json:"challenger_score,omitempty"`
	Incumbent       *CheckpointRef `json:"incumbent,omitempty"`
	IncumbentScore  *float64       `json:"incumbent_score,omitempty"`
	Promoted        bool           `json:"promoted"`
	Reason          string         `json:"reason"`
}

// PromotionOutput is the decision as recorded: the first one recorded for
// the retrain stands, so a retry returns it whatever it was asked to write.
type PromotionOutput struct {
	Promoted bool   `json:"promoted"`
	Reason   string `json:"reason"`
}

// RecordPromotion records a retrain's decision, once per retrain. A
// promotion stands only if the lineage's champion is still in.Incumbent
// (none when nil), the one the retrain compared against; otherwise the
// decision is recorded as not promoted (store.Store.RecordPromotion).
func (c *Control) RecordPromotion(ctx context.Context, in PromotionInput) (PromotionOutput, error) {
	p := metadata.Promotion{
		Lineage: in.Lineage, RetrainRunID: in.RetrainID,
		ChallengerRunID: in.Challenger.RunID, ChallengerCheckpointURI: in.Challenger.URI, ChallengerScore: in.ChallengerScore,
		Promoted: in.Promoted, Reason: in.Reason,
	}
	if in.Incumbent != nil {
		p.IncumbentRunID, p.IncumbentCheckpointURI, p.IncumbentScore = in.Incumbent.RunID, in.Incumbent.URI, in.IncumbentScore
	}
	got, err := c.Store.RecordPromotion(ctx, p)
	if err != nil {
		return PromotionOutput{}, classify("record promotion of retrain "+in.RetrainID, err)
	}
	return PromotionOutput{Promoted: got.Promoted, Reason: got.Reason}, nil
}
