package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
)

// RecommendInput asks for the recommendation of a run whose chosen
// checkpoint (the best by validation Sharpe) is Checkpoint, under the
// run's backtest.min_valid_t MinValidT (0: the gate is off).
type RecommendInput struct {
	Checkpoint CheckpointRef `json:"checkpoint"`
	MinValidT  float64       `json:"min_valid_t"`
}

// RecommendOutput is the recommendation recorded, and the checkpoint's
// ref after its metadata was written (a new SHA-256 and size).
type RecommendOutput struct {
	Checkpoint     CheckpointRef             `json:"checkpoint"`
	Recommendation checkpoint.Recommendation `json:"recommendation"`
}

// RecordRecommendation writes into a run's chosen checkpoint what the
// run recommends doing with it (ADR 0016), the metadata "dqnflow train"
// writes into its own (checkpoint.SetRecommendation): the checkpoint's
// validation Sharpe and its t-statistic (sim.Report.SharpeT) from the
// validation backtest of its epoch that the run recorded,
// backtest.min_valid_t, and flat when t falls short of it
// (config.BacktestConfig.NoEdge), trade otherwise. The blob is rewritten
// atomically at its URI (checkpoint.Store.Write, signed with this
// worker's key; a signed checkpoint is refused by a worker without one)
// and its row recorded again with the new SHA-256, keeping its
// metrics and validation Sharpe, so that loads verify it and it stays
// the run's best.
//
// Retry: the same backtest row gives the same recommendation, so a retry
// writes the same metadata again and records the same row.
func (c *Control) RecordRecommendation(ctx context.Context, in RecommendInput) (RecommendOutput, error) {
	ref := in.Checkpoint
	what := fmt.Sprintf("run %s epoch %d: record the recommendation", ref.RunID, ref.Epoch)
	bts, err := c.Store.ListBacktests(ctx, ref.RunID)
	if err != nil {
		return RecommendOutput{}, classify(what+": read its backtests", err)
	}
	var rep *sim.Report
	for _, b := range bts {
		if b.Epoch == ref.Epoch && b.Split == "valid" {
			rep = new(sim.Report)
			if err := json.Unmarshal(b.Report, rep); err != nil {
				return RecommendOutput{}, nonRetryable(ErrTypeStoreRejected, what, fmt.Errorf("its validation backtest's report: %w", err), "")
			}
		}
	}
	if rep == nil {
		return RecommendOutput{}, fmt.Errorf("%s: the store holds no validation backtest of epoch %d", what, ref.Epoch)
	}
	t := rep.SharpeT()
	rec := checkpoint.NewRecommendation(rep.Sharpe, t, in.MinValidT, config.BacktestConfig{MinValidT: in.MinValidT}.NoEdge(t))
	ck, info, err := c.checkpoints().Read(ctx, ref.URI, ref.SHA256)
	if err != nil {
		return RecommendOutput{}, readError(what, err)
	}
	// A signed checkpoint that this worker verified nothing of would be
	// written back unsigned, and the GPU workers would refuse it.
	if info.Meta[checkpoint.MetaSignature] != "" && info.SignedBy == "" {
		return RecommendOutput{}, nonRetryable(ErrTypeStoreRejected, what, errors.New("the checkpoint is signed and this control worker has no signing key"),
			"give the control workers the GPU workers' --checkpoint-key-file")
	}
	if ck.Meta == nil {
		ck.Meta = map[string]string{}
	}
	checkpoint.SetRecommendation(ck.Meta, rec)
	info, err = c.checkpoints().Write(ctx, ref.URI, ck)
	if err != nil {
		return RecommendOutput{}, classify(what, err)
	}
	row := metadata.CheckpointRecord{RunID: ref.RunID, Epoch: ref.Epoch, URI: ref.URI, GlobalStep: ref.GlobalStep,
		SHA256: info.SHA256, Bytes: info.Bytes, ValidSharpe: &rep.Sharpe}
	rows, err := c.Store.ListCheckpoints(ctx, ref.RunID)
	if err != nil {
		return RecommendOutput{}, classify(what+": read its row", err)
	}
	for _, r := range rows {
		if r.Epoch == ref.Epoch {
			row.Metrics = r.Metrics
			if r.ValidSharpe != nil {
				row.ValidSharpe = r.ValidSharpe
			}
		}
	}
	if _, err := c.Store.RecordCheckpoint(ctx, row); err != nil {
		return RecommendOutput{}, classify(what+": record", err)
	}
	ref.SHA256, ref.Bytes = info.SHA256, info.Bytes
	return RecommendOutput{Checkpoint: ref, Recommendation: rec}, nil
}
