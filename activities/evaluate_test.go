package activities_test

import (
	"context"
	"testing"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// TestEvaluateScoresCheckpointsOnOneWindow: EvaluateCheckpoints scores
// real checkpoints with their greedy policies (trainer/policy) on the
// validation range of the input config, exactly as policy.Load and
// Backtest do, without building a trainer on the worker's backend.
func TestEvaluateScoresCheckpointsOnOneWindow(t *testing.T) {
	cfg := tinyCPUConfig()
	root := t.TempDir()
	r := newRig(t, root, nil)
	r.a.Backend, r.a.Prepare = cpu.Backend{}, nil
	r.open(activities.OpenInput{Config: cfg})
	var refs []activities.CheckpointRef
	for e := 1; e <= 2; e++ {
		r.epoch(e)
		var ck activities.CheckpointOutput
		r.must(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: e}, &ck)
		refs = append(refs, ck.Checkpoint)
	}

	ev := newRig(t, root, r.store) // its backend is the fake: it must not be used
	ev.a.Prepare = nil
	var out activities.EvaluateOutput
	ev.must(ev.a.EvaluateCheckpoints, activities.EvaluateInput{Config: cfg, Checkpoints: refs}, &out)
	if len(out.Reports) != 2 {
		t.Fatalf("%d reports for 2 checkpoints", len(out.Reports))
	}
	if n := len(ev.backend.Trainers()); n != 0 {
		t.Errorf("evaluation built %d trainers on the worker's backend", n)
	}
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, ref := range refs {
		ck, _, err := checkpoint.Read(context.Background(), ref.URI, checkpoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pol, err := policy.Load(ck)
		if err != nil {
			t.Fatal(err)
		}
		want, err := pol.Backtest(ds, ds.Valid)
		if err != nil {
			t.Fatal(err)
		}
		got := out.Reports[i]
		if got.Sharpe != want.Sharpe || got.TotalReturn != want.TotalReturn || got.Trades != want.Trades || got.Bars != ds.Valid.Len() {
			t.Errorf("checkpoint %d: report %+v, want %+v over %d bars", i+1, got.Metrics, want.Metrics, ds.Valid.Len())
		}
	}
}

// TestEvaluateRejectsACheckpointWithoutWeights: a checkpoint without the
// network's tensors is a fatal IncompatibleCheckpoint error, not a retry.
func TestEvaluateRejectsACheckpointWithoutWeights(t *testing.T) {
	root := t.TempDir()
	r, ck := checkpointed(t, root, nil) // the fake backend's checkpoint: no network tensors
	err := r.do(r.a.EvaluateCheckpoints, activities.EvaluateInput{Config: testConfig(), Checkpoints: []activities.CheckpointRef{ck.Checkpoint}}, nil)
	if errType(err) != activities.ErrTypeIncompatibleCheckpoint || !activities.IsFatal(err) {
		t.Fatalf("evaluating a checkpoint without weights: %v, want a fatal %s error", err, activities.ErrTypeIncompatibleCheckpoint)
	}
}
