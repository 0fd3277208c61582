package activities_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
)

// signingStore opens the directory store root with a new Ed25519 key of
// the test, as a worker with --checkpoint-key-file does.
func signingStore(t *testing.T, root string) (*checkpoint.Store, *checkpoint.Keys) {
	t.Helper()
	k, err := checkpoint.GenerateKeys(filepath.Join(t.TempDir(), "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := checkpoint.OpenStore(t.Context(), root, checkpoint.Options{Keys: k})
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

// TestCheckpointWithoutTheWorkersSignatureIsTreatedAsDamaged: on workers
// that sign their checkpoints, a run whose last two checkpoints carry
// another key's signature (another deployment's worker, or a file put
// there by someone without the key) restores the newest checkpoint its
// own key signed, naming the refused file and the key that signed it; a
// run with no checkpoint of its key fails with CorruptCheckpoint and
// builds no trainer: a checkpoint whose signature is refused is never
// trained from.
func TestCheckpointWithoutTheWorkersSignatureIsTreatedAsDamaged(t *testing.T) {
	root := t.TempDir()
	ours, _ := signingStore(t, root)
	theirs, theirKey := signingStore(t, root)
	r := newRig(t, root, nil)
	r.a.Checkpoints = ours
	r.open(activities.OpenInput{})
	refs := make([]activities.CheckpointRef, 4)
	for e := 1; e <= 3; e++ {
		if e == 2 {
			r.a.Checkpoints = theirs
		}
		r.epoch(e)
		var ck activities.CheckpointOutput
		r.must(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: e}, &ck)
		refs[e] = ck.Checkpoint
	}
	other := newRig(t, root, r.store)
	other.a.Checkpoints = ours
	var out activities.OpenOutput
	other.must(other.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig(), Epoch: 3, GlobalStep: 30, Resume: &refs[3]}, &out)
	if out.Fallback == nil || out.Fallback.URI != refs[1].URI || out.Epoch != 1 || !out.Restored {
		t.Fatalf("open from epoch 3 signed with another key: %+v; want a restore of epoch 1, the last one this key signed", out)
	}
	if !strings.Contains(out.Damaged, refs[3].URI) || !strings.Contains(out.Damaged, "signed with key "+theirKey.ID()) {
		t.Errorf("Damaged %q does not name %s and the key that signed it", out.Damaged, refs[3].URI)
	}

	plainRoot := t.TempDir()
	plain := newRig(t, plainRoot, nil) // unsigned: checkpoint.Local
	plain.open(activities.OpenInput{})
	plain.epoch(1)
	var ck activities.CheckpointOutput
	plain.must(plain.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, &ck)
	keyed := newRig(t, plainRoot, plain.store)
	keyed.a.Checkpoints, _ = signingStore(t, plainRoot)
	err := keyed.do(keyed.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig(), Epoch: 1, GlobalStep: 10, Resume: &ck.Checkpoint}, nil)
	if errType(err) != activities.ErrTypeCorruptCheckpoint || !strings.Contains(err.Error(), "not signed") || !strings.Contains(err.Error(), ck.Checkpoint.URI) {
		t.Errorf("open from an unsigned checkpoint on a signing worker: %v; want %s naming the file as not signed", err, activities.ErrTypeCorruptCheckpoint)
	}
	if news, restores := keyed.backend.Counts(); news+restores != 0 {
		t.Errorf("a trainer was built from the refused checkpoint (%d new, %d restored)", news, restores)
	}
}

// TestCheckpointOverTheSizeLimitFailsTheRun: a worker whose checkpoint
// limit (--checkpoint-max-bytes) is below the size of the run's
// checkpoint refuses to write it, since no worker with that limit could
// read it back: the activity fails at once as InvalidConfig, naming the
// file and the flag, and records no row and leaves no file.
func TestCheckpointOverTheSizeLimitFailsTheRun(t *testing.T) {
	root := t.TempDir()
	small, err := checkpoint.OpenStore(t.Context(), root, checkpoint.Options{MaxBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, root, nil)
	r.a.Checkpoints = small
	r.open(activities.OpenInput{})
	r.epoch(1)
	err = r.do(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, nil)
	if errType(err) != activities.ErrTypeInvalidConfig || !strings.Contains(err.Error(), "--checkpoint-max-bytes") || !strings.Contains(err.Error(), "epoch-000001.safetensors") {
		t.Fatalf("checkpoint over the limit: %v; want %s naming the file and the flag", err, activities.ErrTypeInvalidConfig)
	}
	if cks, err := r.store.ListCheckpoints(t.Context(), runID); err != nil || len(cks) != 0 {
		t.Errorf("rows after the refused write: %v, %v", cks, err)
	}
	var files []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("the refused write left %v", files)
	}
}
