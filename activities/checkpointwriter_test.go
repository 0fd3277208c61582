package activities

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
)

// TestCheckpointWriteOutlivesTheChunksCancellation: a checkpoint whose
// state was taken is written and recorded although the chunk's context is
// cancelled before the write, so a stopped run leaves no blob without its
// row.
func TestCheckpointWriteOutlivesTheChunksCancellation(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(dir, "metadata.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateRun(context.Background(), metadata.NewRun{RunID: "r", Config: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	a := &Trainer{Store: st, Checkpoints: checkpoint.Local(dir)}
	uri, err := a.checkpoints().Locate("r/epoch-000001.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := &EpochsOutput{Epochs: []EpochResult{{Epoch: 1}}}
	w := &checkpointWriter{a: a, ctx: ctx, out: out, scores: &out.Scores, p: &progress{}}
	w.start(snapshotted{
		in: CheckpointInput{RunID: "r", Epoch: 1},
		encode: func() (*checkpoint.Checkpoint, error) {
			return &checkpoint.Checkpoint{
				Meta:    map[string]string{checkpoint.MetaFormat: checkpoint.FormatVersion},
				Tensors: []checkpoint.Tensor{checkpoint.F32Tensor("w", []int{2}, []float32{1, 2})},
			}, nil
		},
		meta: map[string]string{checkpoint.MetaRunID: "r", checkpoint.MetaEpoch: "1"},
		ref:  CheckpointRef{RunID: "r", URI: uri, Epoch: 1},
	})
	if err := w.wait(); err != nil {
		t.Fatalf("the write after the chunk's cancellation: %v", err)
	}
	rows, err := st.ListCheckpoints(context.Background(), "r")
	if err != nil || len(rows) != 1 || rows[0].URI != uri {
		t.Fatalf("checkpoint rows %+v (%v), want the one written", rows, err)
	}
	if ck := out.Epochs[0].Checkpoint; ck == nil || ck.SHA256 != rows[0].SHA256 {
		t.Errorf("the epoch's result names %+v, the row %s", ck, rows[0].SHA256)
	}
	if _, _, err := checkpoint.ReadVerified(context.Background(), uri, rows[0].SHA256, checkpoint.Options{}); err != nil {
		t.Error(err)
	}
}
