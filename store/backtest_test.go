package store

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
)

var (
	validFrom = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	validTo   = time.Date(2024, 3, 31, 23, 0, 0, 0, time.UTC)
)

func backtestAt(runID string, epoch int, split string, sharpe *float64) metadata.BacktestRecord {
	return metadata.BacktestRecord{
		RunID: runID, Epoch: epoch, Split: split, DataFrom: validFrom, DataTo: validTo,
		Report: json.RawMessage(`{"trades": 12}`), Sharpe: sharpe, TotalReturn: 0.03, MaxDrawdown: 0.02,
	}
}

func recordBacktest(t *testing.T, s Metadata, b metadata.BacktestRecord) metadata.BacktestRecord {
	t.Helper()
	out, err := s.RecordBacktest(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBestFlagFollowsValidSharpe walks the order the workflow uses: the
// checkpoint first, its validation backtest later.
func testBestFlagFollowsValidSharpe(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	best := func() int {
		t.Helper()
		if n := count(t, s, "checkpoints", "run_id = 'r' AND is_best"); n > 1 {
			t.Fatalf("%d best checkpoints", n)
		}
		c, err := s.BestCheckpoint(ctx, "r")
		if err != nil {
			return 0
		}
		return c.Epoch
	}

	c1 := record(t, s, checkpointAt("r", 1, "a"))
	if best() != 0 {
		t.Fatal("a checkpoint without a score is best")
	}
	b1 := recordBacktest(t, s, backtestAt("r", 1, metadata.SplitValid, ptr(0.5)))
	if b1.CheckpointID == nil || *b1.CheckpointID != c1.ID {
		t.Fatalf("backtest checkpoint id = %v, want %d (same run and epoch)", b1.CheckpointID, c1.ID)
	}
	if best() != 1 {
		t.Fatalf("best = epoch %d, want 1", best())
	}
	record(t, s, checkpointAt("r", 2, "b"))
	recordBacktest(t, s, backtestAt("r", 2, metadata.SplitValid, ptr(0.8)))
	if best() != 2 {
		t.Fatalf("best = epoch %d, want 2 (0.8 > 0.5)", best())
	}
	// A test-split backtest is no validation score.
	record(t, s, checkpointAt("r", 3, "c"))
	recordBacktest(t, s, backtestAt("r", 3, metadata.SplitTest, ptr(9.0)))
	if best() != 2 {
		t.Fatalf("best = epoch %d after a test backtest, want 2", best())
	}
	// An undefined Sharpe (NaN) is no score, not the highest one.
	recordBacktest(t, s, backtestAt("r", 3, metadata.SplitValid, ptr(math.NaN())))
	if best() != 2 {
		t.Fatalf("best = epoch %d after a NaN Sharpe, want 2", best())
	}
	// The backtest of epoch 4 lands before its checkpoint is recorded.
	recordBacktest(t, s, backtestAt("r", 4, metadata.SplitValid, ptr(1.1)))
	c4 := record(t, s, checkpointAt("r", 4, "d"))
	if c4.ValidSharpe == nil || *c4.ValidSharpe != 1.1 || best() != 4 {
		t.Fatalf("checkpoint 4 = %+v, best epoch %d; want score 1.1 and best", c4, best())
	}
	// A retried backtest overwrites its row: epoch 4 re-scored lower.
	recordBacktest(t, s, backtestAt("r", 4, metadata.SplitValid, ptr(0.1)))
	if n := count(t, s, "backtests", "run_id = 'r' AND epoch = 4"); n != 1 {
		t.Fatalf("%d backtest rows for epoch 4, want 1", n)
	}
	if best() != 2 {
		t.Fatalf("best = epoch %d after epoch 4 re-scored 0.1, want 2", best())
	}

	// The run's best is over every validation score, checkpointed or not.
	if err := s.RecordEpoch(ctx, "r", 5, metadata.EpochMetrics{Loss: 1, ValidSharpe: ptr(0.9)}); err != nil {
		t.Fatal(err)
	}
	run, _ := s.GetRun(ctx, "r")
	if run.BestEpoch == nil || *run.BestEpoch != 5 || *run.BestValidSharpe != 0.9 {
		t.Fatalf("run best = epoch %v sharpe %v, want epoch 5 at 0.9", run.BestEpoch, run.BestValidSharpe)
	}
	if best() != 2 {
		t.Fatalf("best checkpoint = epoch %d, want 2 (epoch 5 has no checkpoint)", best())
	}

	bts, err := s.ListBacktests(ctx, "r")
	if err != nil || len(bts) != 5 {
		t.Fatalf("ListBacktests = %d, %v; want 5", len(bts), err)
	}
	if !bts[0].DataFrom.Equal(validFrom) || !bts[0].DataTo.Equal(validTo) || string(bts[0].Report) != `{"trades": 12}` {
		t.Fatalf("backtest = %+v, want the data range and report back", bts[0])
	}
}

func testValidBacktestFillsEpochScore(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	if err := s.RecordEpoch(ctx, "r", 1, metadata.EpochMetrics{Loss: 1}); err != nil {
		t.Fatal(err)
	}
	recordBacktest(t, s, backtestAt("r", 1, metadata.SplitValid, ptr(0.3)))
	// Backtest before the epoch row: the epoch picks the score up.
	recordBacktest(t, s, backtestAt("r", 2, metadata.SplitValid, ptr(0.6)))
	if err := s.RecordEpoch(ctx, "r", 2, metadata.EpochMetrics{Loss: 1}); err != nil {
		t.Fatal(err)
	}
	epochs, err := s.ListEpochs(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0.3, 0.6} {
		if got := epochs[i].ValidSharpe; got == nil || *got != want {
			t.Errorf("epoch %d valid sharpe = %v, want %v", i+1, got, want)
		}
	}
}

func testRecordBacktestRejectsBadInput(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	for name, mutate := range map[string]func(*metadata.BacktestRecord){
		"no split":       func(b *metadata.BacktestRecord) { b.Split = "" },
		"no range":       func(b *metadata.BacktestRecord) { b.DataFrom = time.Time{} },
		"reversed range": func(b *metadata.BacktestRecord) { b.DataFrom, b.DataTo = b.DataTo, b.DataFrom },
		"report array":   func(b *metadata.BacktestRecord) { b.Report = json.RawMessage(`[]`) },
		"NaN return":     func(b *metadata.BacktestRecord) { b.TotalReturn = math.NaN() },
		"Inf drawdown":   func(b *metadata.BacktestRecord) { b.MaxDrawdown = math.Inf(1) },
		"epoch 0":        func(b *metadata.BacktestRecord) { b.Epoch = 0 },
	} {
		b := backtestAt("r", 1, metadata.SplitValid, ptr(1.0))
		mutate(&b)
		_, err := s.RecordBacktest(ctx, b)
		if err == nil {
			t.Errorf("%s: recorded", name)
			continue
		}
		wantErrIs(t, err, metadata.ErrInvalid)
	}
	_, err := s.RecordBacktest(ctx, backtestAt("missing", 1, metadata.SplitValid, nil))
	wantErrIs(t, err, metadata.ErrNotFound)
}
