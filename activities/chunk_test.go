package activities_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
)

// sharpeByEpoch is a validation Sharpe that rises to epoch 2 and falls
// after (testConfig trains 10 steps per epoch).
func sharpeByEpoch(step int64) float64 {
	return map[int64]float64{10: 0.5, 20: 0.9, 30: 0.4, 40: 0.3, 50: 0.2, 60: 0.1}[step]
}

func chunkConfig() config.RunConfig {
	cfg := testConfig()
	cfg.Epochs, cfg.Checkpoint.Every, cfg.Backtest.Every, cfg.Backtest.Patience = 6, 3, 1, 0
	return cfg
}

// TestRunEpochsIsTheSameInChunksOfOne runs epochs 1-6 once in one
// RunEpochs call and once in six chunks of one epoch, each going on from
// the scores the one before returned (as the workflow commits them),
// checkpointing and backtesting where epochloop.Due and activities.Scores
// say: both write the same checkpoints (bit for bit), backtests and epoch
// rows. (It was the comparison with the per-stage activities that issue 46
// removed.)
func TestRunEpochsIsTheSameInChunksOfOne(t *testing.T) {
	cfg := chunkConfig()
	ctx := context.Background()

	chunk := newRig(t, t.TempDir(), nil)
	chunk.backend.Sharpe = sharpeByEpoch
	chunk.open(activities.OpenInput{Config: cfg})
	var out activities.EpochsOutput
	chunk.must(chunk.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 0, Until: cfg.Epochs, Budget: time.Hour}, &out)

	stages := newRig(t, t.TempDir(), nil)
	stages.backend.Sharpe = sharpeByEpoch
	stages.open(activities.OpenInput{Config: cfg})
	var sc activities.Scores
	wantCk := map[int]string{}
	for e := 1; e <= cfg.Epochs; e++ {
		var one activities.EpochsOutput
		stages.must(stages.a.RunEpochs, activities.EpochsInput{RunID: runID, After: e - 1, Until: e, Scores: sc}, &one)
		if len(one.Epochs) != 1 || one.Epochs[0].Epoch != e || one.Early {
			t.Fatalf("chunk of epoch %d: %+v", e, one)
		}
		sc = one.Scores
		if ck := one.Epochs[0].Checkpoint; ck != nil {
			wantCk[e] = ck.SHA256
		}
	}

	if len(out.Epochs) != cfg.Epochs || out.Early || out.Replayed {
		t.Fatalf("RunEpochs did %d epochs (early %v, replayed %v), want %d", len(out.Epochs), out.Early, out.Replayed, cfg.Epochs)
	}
	gotCk := map[int]string{}
	for i, ep := range out.Epochs {
		if ep.Epoch != i+1 || ep.Train.GlobalStep != int64(10*(i+1)) || ep.ValidSharpe == nil || *ep.ValidSharpe != sharpeByEpoch(int64(10*(i+1))) {
			t.Errorf("epoch result %d: %+v", i, ep)
		}
		if ep.Checkpoint != nil {
			gotCk[ep.Epoch] = ep.Checkpoint.SHA256
		}
	}
	// Checkpoints at 1 and 2 (new bests), 3 and 6 (every 3).
	if !reflect.DeepEqual(gotCk, wantCk) || len(gotCk) != 4 {
		t.Errorf("checkpoints by epoch: one chunk %v, chunks of one %v; want epochs 1, 2, 3, 6 with equal files", gotCk, wantCk)
	}
	if out.Scores.BestEpoch != 2 || out.Scores.SinceBest != 4 || out.Scores.BestCheckpoint == nil || out.Scores.BestCheckpoint.Epoch != 2 {
		t.Errorf("scores %+v: want best epoch 2 with its checkpoint, 4 backtests since", out.Scores)
	}
	for _, r := range []*rig{chunk, stages} {
		bts, err := r.store.ListBacktests(ctx, runID)
		if err != nil || len(bts) != cfg.Epochs {
			t.Errorf("backtests %d (%v), want %d", len(bts), err, cfg.Epochs)
		}
	}
	eps, err := chunk.store.ListEpochs(ctx, runID)
	if err != nil || len(eps) != cfg.Epochs {
		t.Fatalf("RunEpochs recorded %d epoch rows (%v), want %d", len(eps), err, cfg.Epochs)
	}
	for i, ep := range eps {
		if ep.Epoch != i+1 || ep.GlobalStep != int64(10*(i+1)) || ep.Loss != out.Epochs[i].Train.Loss ||
			ep.ValidSharpe == nil || *ep.ValidSharpe != *out.Epochs[i].ValidSharpe {
			t.Errorf("epoch row %+v, want epoch %d with the chunk's loss and validation Sharpe", ep, i+1)
		}
	}
}

// TestRunEpochsEndsAtItsBudgetAndReplaysARetry: a chunk stops at the first
// epoch boundary after its budget; the same request again returns the
// recorded result without training, and a request from another epoch is
// refused as a lost trainer.
func TestRunEpochsEndsAtItsBudgetAndReplaysARetry(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	cfg := chunkConfig()
	r.open(activities.OpenInput{Config: cfg})
	in := activities.EpochsInput{RunID: runID, After: 0, Until: cfg.Epochs, Budget: time.Nanosecond}
	var first, again activities.EpochsOutput
	r.must(r.a.RunEpochs, in, &first)
	r.must(r.a.RunEpochs, in, &again)
	tr := r.backend.Trainers()[0]
	if len(first.Epochs) != 1 || tr.Trains != 1 {
		t.Fatalf("a 1 ns budget trained %d epochs (%d Train calls), want 1", len(first.Epochs), tr.Trains)
	}
	if !again.Replayed || !reflect.DeepEqual(again.Epochs, first.Epochs) {
		t.Errorf("the retry returned %+v, want the first result replayed", again)
	}
	if err := r.do(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 3, Until: 6, Budget: time.Hour}, nil); errType(err) != activities.ErrTypeTrainerLost {
		t.Errorf("a chunk after epoch 3 of a trainer at epoch 1: %v, want %s", err, activities.ErrTypeTrainerLost)
	}
	var next activities.EpochsOutput
	r.must(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 1, Until: 2, Budget: time.Hour}, &next)
	if len(next.Epochs) != 1 || next.Epochs[0].Epoch != 2 {
		t.Errorf("the chunk after epoch 1 up to 2 did %+v, want epoch 2 only", next.Epochs)
	}
}

// TestRunEpochsStopsWhenThePatienceRunsOut: the epoch that exhausts the
// patience ends the chunk and is checkpointed, like settle does it.
func TestRunEpochsStopsWhenThePatienceRunsOut(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	r.backend.Sharpe = sharpeByEpoch
	cfg := chunkConfig()
	cfg.Epochs, cfg.Checkpoint.Every, cfg.Backtest.Patience = 20, 10, 2
	r.open(activities.OpenInput{Config: cfg})
	var out activities.EpochsOutput
	r.must(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 0, Until: cfg.Epochs, Budget: time.Hour}, &out)
	last := out.Epochs[len(out.Epochs)-1]
	if !out.Early || last.Epoch != 4 || last.Checkpoint == nil {
		t.Fatalf("chunk ended at epoch %d (early %v, checkpoint %+v), want early at 4 with a checkpoint", last.Epoch, out.Early, last.Checkpoint)
	}
}

// TestChunkLeftoversAreTheFailedChunksCheckpoints: what a chunk recorded
// before it failed is read back, newest checkpoint last, with the
// validation Sharpes the workflow scores it with.
func TestChunkLeftoversAreTheFailedChunksCheckpoints(t *testing.T) {
	root := t.TempDir()
	r := newRig(t, root, nil)
	r.backend.Sharpe = sharpeByEpoch
	cfg := chunkConfig()
	r.open(activities.OpenInput{Config: cfg})
	// The chunk fails in epoch 5's training, after epochs 1-4 were
	// recorded and 1, 2 and 3 checkpointed.
	r.backend.TrainErr = func(step int64) error {
		if step == 40 {
			return context.DeadlineExceeded
		}
		return nil
	}
	err := r.do(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 0, Until: cfg.Epochs, Budget: time.Hour}, nil)
	if errType(err) != activities.ErrTypeTrainerLost {
		t.Fatalf("the failed chunk: %v, want %s", err, activities.ErrTypeTrainerLost)
	}
	c := &activities.Control{Store: r.store, Checkpoints: checkpoint.Local(root)}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(c)
	v, err := env.ExecuteActivity(c.ChunkLeftovers, activities.LeftoversInput{RunID: runID, After: 1, Until: cfg.Epochs})
	if err != nil {
		t.Fatal(err)
	}
	var left activities.LeftoversOutput
	if err := v.Get(&left); err != nil {
		t.Fatal(err)
	}
	var cks []int
	for _, ck := range left.Checkpoints {
		cks = append(cks, ck.Epoch)
	}
	want := []activities.EpochSharpe{{Epoch: 2, Sharpe: 0.9}, {Epoch: 3, Sharpe: 0.4}, {Epoch: 4, Sharpe: 0.3}}
	if !reflect.DeepEqual(cks, []int{2, 3}) || !reflect.DeepEqual(left.Sharpes, want) {
		t.Errorf("leftovers after epoch 1: checkpoints %v, Sharpes %v; want [2 3] and %v", cks, left.Sharpes, want)
	}
	if ck := left.Checkpoints[1]; ck.GlobalStep != 30 || ck.SHA256 == "" {
		t.Errorf("newest leftover %+v, want epoch 3 at global step 30 with its SHA-256", ck)
	}
}

// TestEpochRowTheStoreRefusesFailsTheChunk: the epoch rows are written in
// the background, and a row the store refuses (a run it does not know)
// still fails the chunk with the store's non-retryable error.
func TestEpochRowTheStoreRefusesFailsTheChunk(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	cfg := chunkConfig()
	cfg.Checkpoint.Every, cfg.Backtest.Every = 5, 5
	r.open(activities.OpenInput{RunID: "unrecorded", Config: cfg})
	err := r.do(r.a.RunEpochs, activities.EpochsInput{RunID: "unrecorded", After: 0, Until: 2, Budget: time.Hour}, nil)
	if errType(err) != activities.ErrTypeStoreRejected || !activities.IsFatal(err) {
		t.Fatalf("chunk of a run the store does not know: %v, want a fatal %s", err, activities.ErrTypeStoreRejected)
	}
}

// slowRecords is a CheckpointStore whose RecordCheckpoint of one epoch
// waits for a signal (or fails), so that a test sees what the chunk does
// while a checkpoint is still being written.
type slowRecords struct {
	activities.CheckpointStore
	epoch   int
	release <-chan struct{} // RecordCheckpoint of epoch waits for it (at most 10 s)
	fail    error           // or returns this
	waited  chan bool       // receives whether release came before the 10 s
}

func (s *slowRecords) RecordCheckpoint(ctx context.Context, c metadata.CheckpointRecord) (metadata.CheckpointRecord, error) {
	if c.Epoch == s.epoch {
		if s.fail != nil {
			return metadata.CheckpointRecord{}, s.fail
		}
		select {
		case <-s.release:
			s.waited <- true
		case <-time.After(10 * time.Second):
			s.waited <- false
		}
	}
	return s.CheckpointStore.RecordCheckpoint(ctx, c)
}

// TestChunkWritesEachCheckpointBesideTheNextEpoch: with a checkpoint every
// epoch, epoch 1's checkpoint is still being written (its row waits) when
// epoch 2 starts training; when the chunk returns, every epoch's result
// names a whole, recorded checkpoint of that epoch.
func TestChunkWritesEachCheckpointBesideTheNextEpoch(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	cfg := chunkConfig()
	cfg.Epochs, cfg.Checkpoint.Every = 4, 1
	r.open(activities.OpenInput{Config: cfg})
	training := make(chan struct{})
	r.backend.TrainErr = func(step int64) error {
		if step == 10 { // epoch 2's Train
			close(training)
		}
		return nil
	}
	slow := &slowRecords{CheckpointStore: r.store, epoch: 1, release: training, waited: make(chan bool, 1)}
	r.a.Store = slow
	var out activities.EpochsOutput
	r.must(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 0, Until: cfg.Epochs, Budget: time.Hour}, &out)
	if !<-slow.waited {
		t.Error("epoch 2 did not start training while epoch 1's checkpoint was being recorded: the chunk waits for its checkpoints")
	}
	if len(out.Epochs) != cfg.Epochs {
		t.Fatalf("the chunk trained %d epochs, want %d", len(out.Epochs), cfg.Epochs)
	}
	rows, err := r.store.ListCheckpoints(context.Background(), runID)
	if err != nil || len(rows) != cfg.Epochs {
		t.Fatalf("%d checkpoint rows (%v), want %d", len(rows), err, cfg.Epochs)
	}
	for i, ep := range out.Epochs {
		ck := ep.Checkpoint
		if ck == nil || ck.Epoch != ep.Epoch || ck.GlobalStep != ep.Train.GlobalStep || ck.SHA256 != rows[i].SHA256 {
			t.Fatalf("epoch %d's checkpoint %+v, row %+v: want that epoch's, recorded", ep.Epoch, ck, rows[i])
		}
		if _, _, err := checkpoint.ReadVerified(context.Background(), ck.URI, ck.SHA256, checkpoint.Options{}); err != nil {
			t.Errorf("epoch %d: %v", ep.Epoch, err)
		}
	}
	if b := out.Scores.BestCheckpoint; b == nil || b.Epoch != out.Scores.BestEpoch {
		t.Errorf("best epoch %d, best checkpoint %+v: want that epoch's", out.Scores.BestEpoch, b)
	}
}

// TestCheckpointWriteThatFailsFailsTheChunk: a checkpoint whose record
// fails in the background fails the chunk by the end of the next epoch,
// naming the checkpoint, and leaves no row of it.
func TestCheckpointWriteThatFailsFailsTheChunk(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	cfg := chunkConfig()
	cfg.Epochs, cfg.Checkpoint.Every = 6, 1
	r.open(activities.OpenInput{Config: cfg})
	r.a.Store = &slowRecords{CheckpointStore: r.store, epoch: 2, fail: errors.New("the store went away")}
	err := r.do(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 0, Until: cfg.Epochs, Budget: time.Hour}, nil)
	if err == nil || !strings.Contains(err.Error(), "epoch 2: checkpoint: record") || !strings.Contains(err.Error(), "the store went away") {
		t.Fatalf("chunk whose epoch-2 checkpoint cannot be recorded: %v", err)
	}
	if n := r.backend.Trainers()[0].Trains; n > 3 {
		t.Errorf("the chunk trained %d epochs before it failed, want at most 3", n)
	}
	rows, err := r.store.ListCheckpoints(context.Background(), runID)
	if err != nil || len(rows) != 1 || rows[0].Epoch != 1 {
		t.Errorf("checkpoint rows %+v (%v), want epoch 1's only", rows, err)
	}
}
