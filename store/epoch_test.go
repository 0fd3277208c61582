package store

import (
	"context"
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/metadata"
)

func testRecordEpochIsIdempotent(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})

	m := metadata.EpochMetrics{Loss: 1.5, GradNorm: 3, EnvSteps: 2048, GlobalStep: 300, DurationMS: 1200,
		ValidSharpe: ptr(0.4), Metrics: map[string]float64{"epsilon": 0.9}}
	for range 3 { // a retried activity
		if err := s.RecordEpoch(ctx, "r", 1, m); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, s, "epochs", "run_id = 'r'"); n != 1 {
		t.Fatalf("%d epoch rows after retries, want 1", n)
	}
	// A resumed run trains epoch 1 again: the latest values win, a missing
	// validation score keeps the recorded one.
	m2 := metadata.EpochMetrics{Loss: 1.25, GradNorm: 2, EnvSteps: 2048, GlobalStep: 300, DurationMS: 900}
	if err := s.RecordEpoch(ctx, "r", 1, m2); err != nil {
		t.Fatal(err)
	}
	epochs, err := s.ListEpochs(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(epochs) != 1 {
		t.Fatalf("ListEpochs = %d epochs, want 1", len(epochs))
	}
	got := epochs[0]
	if got.Epoch != 1 || got.Loss != 1.25 || got.GradNorm != 2 || got.DurationMS != 900 ||
		got.ValidSharpe == nil || *got.ValidSharpe != 0.4 || len(got.Metrics) != 0 {
		t.Fatalf("epoch 1 = %+v (valid sharpe %v), want the second values and valid sharpe 0.4", got, got.ValidSharpe)
	}
	run, _ := s.GetRun(ctx, "r")
	if run.EpochsDone != 1 || run.BestEpoch == nil || *run.BestEpoch != 1 || *run.BestValidSharpe != 0.4 {
		t.Fatalf("run = %+v, want 1 epoch done and best epoch 1 at 0.4", run)
	}
}

func testEpochsDoneNeverGoesDown(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	for _, e := range []int{1, 3, 2} {
		if err := s.RecordEpoch(ctx, "r", e, metadata.EpochMetrics{Loss: 1}); err != nil {
			t.Fatal(err)
		}
	}
	run, _ := s.GetRun(ctx, "r")
	if run.EpochsDone != 3 {
		t.Fatalf("epochs_done = %d after epochs 1, 3, 2; want 3", run.EpochsDone)
	}
}

func testRecordEpochRejectsBadInput(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	for name, tc := range map[string]struct {
		epoch int
		m     metadata.EpochMetrics
	}{
		"epoch 0":        {0, metadata.EpochMetrics{}},
		"NaN loss":       {1, metadata.EpochMetrics{Loss: math.NaN()}},
		"Inf grad norm":  {1, metadata.EpochMetrics{GradNorm: math.Inf(1)}},
		"NaN metric":     {1, metadata.EpochMetrics{Metrics: map[string]float64{"x": math.NaN()}}},
		"negative steps": {1, metadata.EpochMetrics{EnvSteps: -1}},
	} {
		err := s.RecordEpoch(ctx, "r", tc.epoch, tc.m)
		if err == nil {
			t.Errorf("%s: recorded", name)
			continue
		}
		wantErrIs(t, err, metadata.ErrInvalid)
	}
	if n := count(t, s, "epochs", "true"); n != 0 {
		t.Fatalf("%d rows written by rejected calls", n)
	}
	wantErrIs(t, s.RecordEpoch(ctx, "missing", 1, metadata.EpochMetrics{}), metadata.ErrNotFound)
	_, err := s.ListEpochs(ctx, "missing")
	wantErrIs(t, err, metadata.ErrNotFound)
}
