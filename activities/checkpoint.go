package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer"
)

// CheckpointRef points at one checkpoint blob and says what it holds.
type CheckpointRef struct {
	RunID      string `json:"run_id,omitempty"`
	URI        string `json:"uri"`              // absolute file path, or s3://bucket/key
	SHA256     string `json:"sha256,omitempty"` // of the whole file; empty when unknown
	Bytes      int64  `json:"bytes,omitempty"`
	Epoch      int    `json:"epoch"`
	GlobalStep int64  `json:"global_step"`
}

// CheckpointInput asks for a checkpoint of run RunID at the end of epoch
// Epoch. Metrics are stored with it (the epoch's loss, say).
type CheckpointInput struct {
	RunID   string             `json:"run_id"`
	Epoch   int                `json:"epoch"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// CheckpointOutput points at the checkpoint written.
type CheckpointOutput struct {
	Checkpoint CheckpointRef `json:"checkpoint"`
}

// Checkpoint snapshots the run's trainer, adds the run id and epoch to the
// metadata, writes the blob atomically to
// <checkpoint dir>/<run id>/<execution id>/epoch-<NNNNNN>.safetensors
// (without the execution level for runs opened without one) and records
// it in the store. A retry writes the same name again and updates the same
// row; another execution under the same run id writes elsewhere.
func (a *Trainer) Checkpoint(ctx context.Context, in CheckpointInput) (CheckpointOutput, error) {
	_, stop := a.beat(ctx, Heartbeat{Epoch: in.Epoch, Stage: "checkpoint"})
	defer stop()
	run, err := a.acquire(ctx, in.RunID)
	if err != nil {
		return CheckpointOutput{}, err
	}
	defer run.Unlock()
	if run.Epoch != in.Epoch || run.Stage != StageSynced {
		return CheckpointOutput{}, trainerLost(in.RunID, fmt.Sprintf("asked to checkpoint the end of epoch %d, the trainer here is at %s", in.Epoch, run.where()))
	}
	return a.checkpoint(ctx, run, in)
}

// checkpoint writes and records the checkpoint of run, which the caller
// holds locked at the end of epoch in.Epoch.
func (a *Trainer) checkpoint(ctx context.Context, run *Run, in CheckpointInput) (CheckpointOutput, error) {
	what := fmt.Sprintf("run %s epoch %d: checkpoint", in.RunID, in.Epoch)
	ck, err := run.Trainer.Snapshot()
	if err != nil {
		return CheckpointOutput{}, classify(what+": snapshot", err)
	}
	if ck.Meta == nil {
		ck.Meta = map[string]string{}
	}
	for k, v := range trainer.Origin(run.Info) {
		ck.Meta[k] = v
	}
	if run.NotBitExact != "" {
		ck.Meta[checkpoint.MetaNotBitExact] = run.NotBitExact
	}
	ck.Meta[checkpoint.MetaRunID] = in.RunID
	ck.Meta[checkpoint.MetaEpoch] = strconv.Itoa(in.Epoch)
	ck.Meta[checkpoint.MetaGlobalStep] = strconv.FormatInt(run.GlobalStep, 10)
	if ck.Meta[checkpoint.MetaDevice] == "" {
		// Every checkpoint names the device that trained it, also where
		// the backend's snapshot leaves that to the caller (the CPU's).
		ck.Meta[checkpoint.MetaDevice] = run.Info.Device
	}

	uri, err := a.blobURI(run, in.Epoch)
	if err != nil {
		return CheckpointOutput{}, classify(what+": checkpoint.dir "+run.Config.Checkpoint.Dir, err)
	}
	if !a.checkpoints().Remote() {
		removeStaleTemps(ctx, filepath.Dir(uri))
	}
	info, err := a.checkpoints().Write(ctx, uri, ck)
	if err != nil {
		return CheckpointOutput{}, classify(what, err)
	}
	ref := CheckpointRef{
		RunID: in.RunID, URI: uri, SHA256: info.SHA256, Bytes: info.Bytes,
		Epoch: in.Epoch, GlobalStep: run.GlobalStep,
	}
	if _, err := a.Store.RecordCheckpoint(ctx, store.CheckpointRecord{
		RunID: in.RunID, Epoch: in.Epoch, URI: ref.URI, SHA256: ref.SHA256, Bytes: ref.Bytes,
		GlobalStep: ref.GlobalStep, Metrics: in.Metrics,
	}); err != nil {
		return CheckpointOutput{}, classify(what+": record", err)
	}
	return CheckpointOutput{Checkpoint: ref}, nil
}

// staleTemp is how long a checkpoint's temporary file must have been
// left untouched before removeStaleTemps takes it for the remains of a
// worker killed while writing: a live writer touches it continuously.
const staleTemp = 5 * time.Minute

// removeStaleTemps removes the temporary files (.epoch-*.safetensors.tmp-*,
// see checkpoint.Write) that a worker killed in the middle of a write left
// in the run's checkpoint directory. The checkpoint itself never was
// half-written: the final name appears only by the rename after the fsync.
func removeStaleTemps(ctx context.Context, dir string) {
	tmps, _ := filepath.Glob(filepath.Join(dir, ".epoch-*.safetensors.tmp-*"))
	for _, p := range tmps {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > staleTemp {
			if err := os.Remove(p); err == nil {
				activity.GetLogger(ctx).Info("Removed the temporary file of an interrupted checkpoint write", "file", p, "bytes", st.Size())
			}
		}
	}
}

// blobURI is the URI of run's checkpoint at the end of epoch, under
// checkpoint.dir taken relative to the worker's checkpoint store. A
// checkpoint.dir that leads out of the store (an absolute path elsewhere,
// "..", a symbolic link pointing out) is refused: a run config, which
// anyone who can start a workflow writes, must not make the worker write
// files anywhere it can.
func (a *Trainer) blobURI(run *Run, epoch int) (string, error) {
	dir := filepath.Join(run.Config.Checkpoint.Dir, safeName(run.ID))
	if run.ExecutionID != "" {
		dir = filepath.Join(dir, safeName(run.ExecutionID))
	}
	return a.checkpoints().Locate(filepath.Join(dir, fmt.Sprintf("epoch-%06d.safetensors", epoch)))
}

// safeName maps a run id (a workflow id, free text) to one path element.
func safeName(id string) string {
	b := []byte(id)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			b[i] = '_'
		}
	}
	if s := string(b); s != "." && s != ".." {
		return s
	}
	return "_"
}

// BacktestInput asks for the validation backtest of run RunID's weights at
// the end of epoch Epoch.
type BacktestInput struct {
	RunID string `json:"run_id"`
	Epoch int    `json:"epoch"`
}

// BacktestOutput is the validation report; Report.Sharpe is the score that
// ranks checkpoints and drives early stopping.
type BacktestOutput struct {
	Epoch  int           `json:"epoch"`
	Report market.Report `json:"report"`
}

// Backtest runs the greedy policy over the run's validation range and
// records the report as the epoch's "valid" backtest.
func (a *Trainer) Backtest(ctx context.Context, in BacktestInput) (BacktestOutput, error) {
	_, stop := a.beat(ctx, Heartbeat{Epoch: in.Epoch, Stage: "backtest"})
	defer stop()
	run, err := a.acquire(ctx, in.RunID)
	if err != nil {
		return BacktestOutput{}, err
	}
	defer run.Unlock()
	if run.Epoch != in.Epoch || run.Stage != StageSynced {
		return BacktestOutput{}, trainerLost(in.RunID, fmt.Sprintf("asked to backtest the end of epoch %d, the trainer here is at %s", in.Epoch, run.where()))
	}
	return a.backtest(ctx, run, in)
}

// backtest runs and records the validation backtest of run, which the
// caller holds locked at the end of epoch in.Epoch.
func (a *Trainer) backtest(ctx context.Context, run *Run, in BacktestInput) (BacktestOutput, error) {
	what := fmt.Sprintf("run %s epoch %d: validation backtest", in.RunID, in.Epoch)
	rep, err := run.Trainer.Backtest(ctx, run.Dataset, run.Dataset.Valid)
	if err != nil {
		return BacktestOutput{}, classify(what, err)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		return BacktestOutput{}, classify(what, fmt.Errorf("encode report: %w", err))
	}
	sharpe := rep.Sharpe
	if _, err := a.Store.RecordBacktest(ctx, store.BacktestRecord{
		RunID: in.RunID, Epoch: in.Epoch, Split: store.SplitValid,
		DataFrom: rep.From, DataTo: rep.To, Report: raw,
		Sharpe: &sharpe, TotalReturn: rep.TotalReturn, MaxDrawdown: rep.MaxDrawdown,
	}); err != nil {
		return BacktestOutput{}, classify(what+": record", err)
	}
	return BacktestOutput{Epoch: in.Epoch, Report: rep}, nil
}
