package activities_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/policy"
	"github.com/dqnflow/dqnflow/worker"
)

// TestTrainingRunOnAPanelValidatesOnItsSeries runs a TrainingRun's
// activities on a config with data.series (two H4 forex slices read
// through the worker's data roots, the CPU backend, PostgreSQL): the
// trainer trains on the panel's joined training set (every series'
// training bars), the validation backtest recorded for the epoch is the
// equal-risk portfolio of the series' own validation backtests
// (sim.PanelValidation of the checkpoint's policy, computed here), not
// a backtest of the first series alone, the checkpoint records the panel
// with each file's SHA-256 (computed here from the bytes), and
// EvaluateCheckpoints scores the checkpoint on that same portfolio. A
// series outside the data roots fails OpenTrainer at once, naming it. The
// run restores from its checkpoint on the same files and trains on; after
// one bar of a series' file changed, the restore fails (BadData, naming
// the file).
func TestTrainingRunOnAPanelValidatesOnItsSeries(t *testing.T) {
	ctx := context.Background()
	st := activitiestest.NewPostgresStore(t, "dqnflow_act_panel")
	fixture, _ := filepath.Abs("../walkforward/testdata")
	dir := t.TempDir() // the data root: copies of the fixture, one changed below
	for _, n := range []string{"EURUSD_H4.csv", "USDJPY_H4.csv", "GBPUSD_H4.csv"} {
		raw, err := os.ReadFile(filepath.Join(fixture, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	roots, err := files.NewRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := prices.Source{Roots: roots}
	tr := &activities.Trainer{Backend: cpu.Backend{}, Registry: worker.NewRegistry(0, nil), Store: st, Data: src, Checkpoints: checkpoint.Local(t.TempDir()), HeartbeatInterval: time.Millisecond}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(tr)
	do := func(fn, in, out any) error {
		t.Helper()
		v, err := env.ExecuteActivity(fn, in)
		if err == nil && out != nil {
			err = v.Get(out)
		}
		return err
	}
	must := func(fn, in, out any) {
		t.Helper()
		if err := do(fn, in, out); err != nil {
			t.Fatal(err)
		}
	}

	cfg := tinyCPUConfig()
	paths := []string{filepath.Join(dir, "EURUSD_H4.csv"), filepath.Join(dir, "USDJPY_H4.csv")}
	cfg.Data.Path, cfg.Data.Series = "", strings.Join(paths, ",")
	cfg.Backtest.MinValidT = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	const id = "panel-run"
	if _, err := st.CreateRun(ctx, metadata.NewRun{RunID: id, Config: cfg.JSON()}); err != nil {
		t.Fatal(err)
	}
	must(tr.OpenTrainer, activities.OpenInput{RunID: id, Config: cfg}, nil)
	must(tr.RunEpochs, activities.EpochsInput{RunID: id, After: 0, Until: 1}, nil)
	var bt activities.BacktestOutput
	must(tr.Backtest, activities.BacktestInput{RunID: id, Epoch: 1}, &bt)
	var ckOut activities.CheckpointOutput
	must(tr.Checkpoint, activities.CheckpointInput{RunID: id, Epoch: 1}, &ckOut)

	pn, err := market.PreparePanel(ctx, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	joined := 0
	for _, p := range pn.Parts {
		joined += p.Train.Len()
	}
	if got := pn.Train.Train.Len(); got != joined {
		t.Fatalf("joined training set of %d bars, want the series' %d", got, joined)
	}
	ck, _, err := checkpoint.Read(ctx, ckOut.Checkpoint.URI, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	want, err := sim.PanelValidation(pol.Backtest, pn.Names(), pn.Parts)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := pol.Backtest(pn.Parts[0], pn.Parts[0].Valid)
	if err != nil {
		t.Fatal(err)
	}
	if bt.Report.Sharpe != want.Sharpe || bt.Report.Sharpe == alone.Sharpe {
		t.Errorf("validation Sharpe %v; want the portfolio's %v (the first series alone: %v)", bt.Report.Sharpe, want.Sharpe, alone.Sharpe)
	}
	rows, err := st.ListBacktests(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Sharpe == nil || *rows[0].Sharpe != want.Sharpe {
		t.Errorf("stored backtests %+v; want epoch 1's with the portfolio's Sharpe %v", rows, want.Sharpe)
	}

	recs, err := market.ParsePanelMeta(ck.Meta[checkpoint.MetaPanel])
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("checkpoint records %d series, want 2", len(recs))
	}
	for k, r := range recs {
		raw, err := os.ReadFile(paths[k])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		if r.Series != pn.Series[k].Name || r.Path != paths[k] || r.SHA256 != hex.EncodeToString(sum[:]) || r.TrainBars != pn.Parts[k].Train.Len() || r.ValidBars != pn.Parts[k].Valid.Len() {
			t.Errorf("checkpoint series %d: %+v; want %s, %s, sha256 %x, %d training and %d validation bars",
				k, r, pn.Series[k].Name, paths[k], sum, pn.Parts[k].Train.Len(), pn.Parts[k].Valid.Len())
		}
	}
	if err := market.CheckPanel(recs, pn); err != nil {
		t.Errorf("the checkpoint's panel against the files: %v", err)
	}
	var inst market.Instrument
	if err := json.Unmarshal([]byte(ck.Meta[checkpoint.MetaInstrument]), &inst); err != nil || inst != pn.Parts[0].Instrument {
		t.Errorf("checkpoint instrument %+v (%v); want the first series' own %+v", inst, err, pn.Parts[0].Instrument)
	}

	var ev activities.EvaluateOutput
	must(tr.EvaluateCheckpoints, activities.EvaluateInput{Config: cfg, Checkpoints: []activities.CheckpointRef{ckOut.Checkpoint}}, &ev)
	if len(ev.Reports) != 1 || ev.Reports[0].Sharpe != want.Sharpe {
		t.Errorf("EvaluateCheckpoints: %+v; want one report with the portfolio's Sharpe %v", ev.Reports, want.Sharpe)
	}

	gbp, err := os.ReadFile(filepath.Join(fixture, "GBPUSD_H4.csv"))
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "GBPUSD_H4.csv")
	if err := os.WriteFile(outside, gbp, 0o644); err != nil {
		t.Fatal(err)
	}
	out := cfg
	out.Data.Series = paths[0] + "," + outside
	err = do(tr.OpenTrainer, activities.OpenInput{RunID: id + "-outside", Config: out}, nil)
	if errType(err) != activities.ErrTypeInvalidConfig || !activities.IsFatal(err) || !strings.Contains(err.Error(), "data.series (GBPUSD_H4)") {
		t.Errorf("a series outside the data roots: %v; want a fatal %s naming data.series", err, activities.ErrTypeInvalidConfig)
	}

	// The worker loses the run: the next open restores the checkpoint on
	// the same files, and the run trains on.
	must(tr.CloseTrainer, activities.CloseInput{RunID: id}, nil)
	resume := ckOut.Checkpoint
	var opened activities.OpenOutput
	must(tr.OpenTrainer, activities.OpenInput{RunID: id, Config: cfg, Epoch: 1, GlobalStep: resume.GlobalStep, Resume: &resume}, &opened)
	if !opened.Restored {
		t.Fatalf("open after the trainer was lost: %+v, want a restore", opened)
	}
	must(tr.RunEpochs, activities.EpochsInput{RunID: id, After: 1, Until: 2}, nil)
	must(tr.Backtest, activities.BacktestInput{RunID: id, Epoch: 2}, nil)

	raw, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	f := strings.Split(lines[100], "\t")
	f[len(f)-1] += "1" // one bar's volume
	lines[100] = strings.Join(f, "\t")
	if err := os.WriteFile(paths[1], []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	must(tr.CloseTrainer, activities.CloseInput{RunID: id}, nil)
	err = do(tr.OpenTrainer, activities.OpenInput{RunID: id, Config: cfg, Epoch: 1, GlobalStep: resume.GlobalStep, Resume: &resume}, nil)
	if errType(err) != activities.ErrTypeBadData || !activities.IsFatal(err) || !strings.Contains(err.Error(), "file "+paths[1]+" has SHA-256") {
		t.Errorf("a restore after %s changed: %v; want a fatal %s naming the file", paths[1], err, activities.ErrTypeBadData)
	}
}
