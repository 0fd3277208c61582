package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
)

// testUnknownRunsAreRefused: every call about a run, checkpoint or lineage
// that does not exist fails with ErrNotFound and writes nothing, so a
// retried activity of a run whose rows are gone never recreates half a run.
func testUnknownRunsAreRefused(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "known"})
	sharpe := 1.0
	day := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	calls := map[string]func() error{
		"GetRun":       func() error { _, err := s.GetRun(ctx, "ghost"); return err },
		"SetRunStatus": func() error { return s.SetRunStatus(ctx, "ghost", metadata.StatusFailed, "x") },
		"SetRunDevice": func() error { return s.SetRunDevice(ctx, "ghost", "cpu", "cpu", "fp32") },
		"RecordEpoch":  func() error { return s.RecordEpoch(ctx, "ghost", 1, metadata.EpochMetrics{Loss: 1}) },
		"RecordCheckpoint": func() error {
			_, err := s.RecordCheckpoint(ctx, metadata.CheckpointRecord{RunID: "ghost", Epoch: 1, URI: "file:///x", SHA256: sha("x")})
			return err
		},
		"RecordBacktest": func() error {
			_, err := s.RecordBacktest(ctx, metadata.BacktestRecord{RunID: "ghost", Epoch: 1, Split: metadata.SplitValid, DataFrom: day, DataTo: day, Sharpe: &sharpe})
			return err
		},
		"Retention":        func() error { _, err := s.Retention(ctx, "ghost", 1, 1); return err },
		"MarkPruned":       func() error { return s.MarkPruned(ctx, []int64{987654}) },
		"ListEpochs":       func() error { _, err := s.ListEpochs(ctx, "ghost"); return err },
		"ListCheckpoints":  func() error { _, err := s.ListCheckpoints(ctx, "ghost"); return err },
		"ListBacktests":    func() error { _, err := s.ListBacktests(ctx, "ghost"); return err },
		"GetCheckpoint":    func() error { _, err := s.GetCheckpoint(ctx, "known", 1); return err },
		"LatestCheckpoint": func() error { _, err := s.LatestCheckpoint(ctx, "ghost"); return err },
		"BestCheckpoint":   func() error { _, err := s.BestCheckpoint(ctx, "known"); return err },
		"Champion":         func() error { _, err := s.Champion(ctx, "no-lineage"); return err },
		"RecordPromotion": func() error {
			_, err := s.RecordPromotion(ctx, metadata.Promotion{Lineage: "known", RetrainRunID: "rt", ChallengerRunID: "ghost", ChallengerCheckpointURI: "file:///x"})
			return err
		},
		"CreateRun with an unknown parent": func() error {
			_, err := s.CreateRun(ctx, metadata.NewRun{RunID: "child", ParentRunID: "ghost", Config: []byte(`{}`)})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if err == nil {
			t.Errorf("%s of an unknown run: no error", name)
			continue
		}
		if !errors.Is(err, metadata.ErrNotFound) {
			t.Errorf("%s of an unknown run: error %v, want one wrapping ErrNotFound", name, err)
		}
	}
	for table, where := range map[string]string{
		"runs": "run_id <> 'known'", "epochs": "1=1", "checkpoints": "1=1", "backtests": "1=1", "promotions": "1=1",
	} {
		if n := count(t, s, table, where); n != 0 {
			t.Errorf("after the refused calls %s has %d rows, want 0", table, n)
		}
	}
}

// testListsOfARunWithoutRowsAreEmpty: a known run without rows lists as
// an empty, non-nil slice (JSON []), and Retention has nothing to prune.
func testListsOfARunWithoutRowsAreEmpty(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	eps, err := s.ListEpochs(ctx, "r")
	if err != nil || eps == nil || len(eps) != 0 {
		t.Errorf("ListEpochs = %v, %v; want [], nil", eps, err)
	}
	cps, err := s.ListCheckpoints(ctx, "r")
	if err != nil || cps == nil || len(cps) != 0 {
		t.Errorf("ListCheckpoints = %v, %v; want [], nil", cps, err)
	}
	bts, err := s.ListBacktests(ctx, "r")
	if err != nil || bts == nil || len(bts) != 0 {
		t.Errorf("ListBacktests = %v, %v; want [], nil", bts, err)
	}
	pr, err := s.Retention(ctx, "r", 1, 0)
	if err != nil || len(pr) != 0 {
		t.Errorf("Retention = %v, %v; want nothing to prune", pr, err)
	}
}
