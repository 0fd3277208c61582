package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
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
	run, _, _, release, err := a.hold(ctx, in.RunID, Heartbeat{Epoch: in.Epoch, Stage: "checkpoint"},
		need{epoch: in.Epoch, asked: fmt.Sprintf("asked to checkpoint the end of epoch %d", in.Epoch)})
	if err != nil {
		return CheckpointOutput{}, err
	}
	defer release()
	return a.checkpoint(ctx, run, in)
}

// checkpoint writes and records the checkpoint of run, which the caller
// holds locked at the end of epoch in.Epoch.
func (a *Trainer) checkpoint(ctx context.Context, run *Run, in CheckpointInput) (CheckpointOutput, error) {
	p, err := a.snapshot(run, in)
	if err != nil {
		return CheckpointOutput{}, err
	}
	ref, err := a.write(ctx, p)
	return CheckpointOutput{Checkpoint: ref}, err
}

// snapshotted is a trainer state copied at the end of an epoch and named,
// not yet encoded or written: everything write needs, so that it can run
// while the trainer goes on (RunEpochs writes in the background).
type snapshotted struct {
	in     CheckpointInput
	encode func() (*checkpoint.Checkpoint, error) // the trainer's checkpoint, from its copy
	meta   map[string]string                      // what the checkpoint's metadata gains
	ref    CheckpointRef                          // SHA256 and Bytes are filled in by write
}

// snapshot copies run's trainer state (the caller holds run locked at the
// end of epoch in.Epoch): a trainer.Capturer's copy, to be encoded by
// write, or a whole Snapshot. It also names the blob and fixes what the
// metadata gains: the run's identity, epoch, global step and origin.
func (a *Trainer) snapshot(run *Run, in CheckpointInput) (snapshotted, error) {
	what := fmt.Sprintf("run %s epoch %d: checkpoint", in.RunID, in.Epoch)
	var encode func() (*checkpoint.Checkpoint, error)
	if c, ok := run.Trainer.(trainer.Capturer); ok {
		var err error
		if encode, err = c.Capture(); err != nil {
			return snapshotted{}, classify(what+": snapshot", err)
		}
	} else {
		ck, err := run.Trainer.Snapshot()
		if err != nil {
			return snapshotted{}, classify(what+": snapshot", err)
		}
		encode = func() (*checkpoint.Checkpoint, error) { return ck, nil }
	}
	meta := trainer.Origin(run.Info)
	if run.NotBitExact != "" {
		meta[checkpoint.MetaNotBitExact] = run.NotBitExact
	}
	if run.Panel != nil {
		pm, err := trainer.PanelMeta(run.Panel)
		if err != nil {
			return snapshotted{}, classify(what+": panel", err)
		}
		maps.Copy(meta, pm)
	}
	meta[checkpoint.MetaRunID] = in.RunID
	meta[checkpoint.MetaEpoch] = strconv.Itoa(in.Epoch)
	meta[checkpoint.MetaGlobalStep] = strconv.FormatInt(run.GlobalStep, 10)
	uri, err := a.blobURI(run, in.Epoch)
	if err != nil {
		return snapshotted{}, classify(what+": checkpoint.dir "+run.Config.Checkpoint.Dir, err)
	}
	return snapshotted{in: in, encode: encode, meta: meta, ref: CheckpointRef{
		RunID: in.RunID, URI: uri, Epoch: in.Epoch, GlobalStep: run.GlobalStep,
	}}, nil
}

// write encodes p's checkpoint (its metadata names the run's backend,
// device and architecture, trainer.Origin, over the backend's own), stores
// its blob atomically (temporary file, fsync, rename; or one object) and
// then records it, so that a row always names a whole blob. It touches
// nothing of the run's, so it may run beside the run's next epoch.
func (a *Trainer) write(ctx context.Context, p snapshotted) (CheckpointRef, error) {
	what := fmt.Sprintf("run %s epoch %d: checkpoint", p.in.RunID, p.in.Epoch)
	ck, err := p.encode()
	if err != nil {
		return CheckpointRef{}, classify(what+": snapshot", err)
	}
	if ck.Meta == nil {
		ck.Meta = map[string]string{}
	}
	for k, v := range p.meta {
		ck.Meta[k] = v
	}
	if !a.checkpoints().Remote() {
		removeStaleTemps(ctx, p.ref.URI)
	}
	info, err := a.checkpoints().Write(ctx, p.ref.URI, ck)
	if err != nil {
		return CheckpointRef{}, classify(what, err)
	}
	ref := p.ref
	ref.SHA256, ref.Bytes = info.SHA256, info.Bytes
	if _, err := a.Store.RecordCheckpoint(ctx, metadata.CheckpointRecord{
		RunID: ref.RunID, Epoch: ref.Epoch, URI: ref.URI, SHA256: ref.SHA256, Bytes: ref.Bytes,
		GlobalStep: ref.GlobalStep, Metrics: p.in.Metrics,
	}); err != nil {
		return CheckpointRef{}, classify(what+": record", err)
	}
	return ref, nil
}

// staleTemp is how long a checkpoint's temporary file must have been
// left untouched before removeStaleTemps takes it for the remains of a
// worker killed while writing: a live writer touches it continuously.
const staleTemp = 5 * time.Minute

// removeStaleTemps removes, before the checkpoint at uri is written, the
// temporary files (.epoch-*.safetensors.tmp-*, see checkpoint.Write) that a
// worker killed in the middle of a write left in the run's checkpoint
// directory: those of uri itself whatever their age, and the others once
// stale. A temporary file of uri belongs to an earlier write of this very
// checkpoint, which is over: a run's checkpoint of an epoch is written by
// the worker that holds the run, one write at a time, and this worker
// holds it now (a lost worker still writing it would only see its rename
// fail). The checkpoint itself never was half-written: the final name
// appears only by the rename after the fsync.
func removeStaleTemps(ctx context.Context, uri string) {
	dir, own := filepath.Dir(uri), "."+filepath.Base(uri)+".tmp-"
	tmps, _ := filepath.Glob(filepath.Join(dir, ".epoch-*.safetensors.tmp-*"))
	for _, p := range tmps {
		if st, err := os.Stat(p); err == nil && (strings.HasPrefix(filepath.Base(p), own) || time.Since(st.ModTime()) > staleTemp) {
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
	Epoch  int        `json:"epoch"`
	Report sim.Report `json:"report"`
}

// Backtest runs the greedy policy over the run's validation range and
// records the report as the epoch's "valid" backtest. A panel run's
// validation is the equal-risk portfolio of its series' own validation
// backtests (sim.PanelValidation; its report sim.PanelScore.Report,
// whose Sharpe is the portfolio's daily Sharpe ratio), as in `dqnflow
// train` and the walk-forward study.
func (a *Trainer) Backtest(ctx context.Context, in BacktestInput) (BacktestOutput, error) {
	run, _, _, release, err := a.hold(ctx, in.RunID, Heartbeat{Epoch: in.Epoch, Stage: "backtest"},
		need{epoch: in.Epoch, asked: fmt.Sprintf("asked to backtest the end of epoch %d", in.Epoch)})
	if err != nil {
		return BacktestOutput{}, err
	}
	defer release()
	return a.backtest(ctx, run, in)
}

// backtest runs and records the validation backtest of run, which the
// caller holds locked at the end of epoch in.Epoch.
func (a *Trainer) backtest(ctx context.Context, run *Run, in BacktestInput) (BacktestOutput, error) {
	what := fmt.Sprintf("run %s epoch %d: validation backtest", in.RunID, in.Epoch)
	var rep sim.Report
	var err error
	if pn := run.Panel; pn != nil {
		var sc sim.PanelScore
		sc, err = sim.PanelValidation(func(d *market.Dataset, r market.Range) (sim.Report, error) {
			return run.Trainer.Backtest(ctx, d, r)
		}, pn.Names(), pn.Parts)
		rep = sc.Report()
	} else {
		rep, err = run.Trainer.Backtest(ctx, run.Dataset, run.Dataset.Valid)
	}
	if err != nil {
		return BacktestOutput{}, classify(what, err)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		return BacktestOutput{}, classify(what, fmt.Errorf("encode report: %w", err))
	}
	sharpe := rep.Sharpe
	if _, err := a.Store.RecordBacktest(ctx, metadata.BacktestRecord{
		RunID: in.RunID, Epoch: in.Epoch, Split: metadata.SplitValid,
		DataFrom: rep.From, DataTo: rep.To, Report: raw,
		Sharpe: &sharpe, TotalReturn: rep.TotalReturn, MaxDrawdown: rep.MaxDrawdown,
	}); err != nil {
		return BacktestOutput{}, classify(what+": record", err)
	}
	return BacktestOutput{Epoch: in.Epoch, Report: rep}, nil
}
