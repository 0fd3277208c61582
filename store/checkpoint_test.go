package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/metadata"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func checkpointAt(runID string, epoch int, content string) metadata.CheckpointRecord {
	return metadata.CheckpointRecord{
		RunID: runID, Epoch: epoch, URI: fmt.Sprintf("file:///ck/%s/%04d.safetensors", runID, epoch),
		SHA256: sha(content), Bytes: int64(len(content)), GlobalStep: int64(300 * epoch),
	}
}

func record(t *testing.T, s Metadata, c metadata.CheckpointRecord) metadata.CheckpointRecord {
	t.Helper()
	out, err := s.RecordCheckpoint(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func epochsOf(cps []metadata.CheckpointRecord) []int {
	var out []int
	for _, c := range cps {
		out = append(out, c.Epoch)
	}
	return out
}

func idsOf(cps []metadata.CheckpointRecord) []int64 {
	var out []int64
	for _, c := range cps {
		out = append(out, c.ID)
	}
	return out
}

func testRecordCheckpointRetry(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})

	c := checkpointAt("r", 1, "weights v1")
	c.ValidSharpe = ptr(0.7)
	c.Metrics = map[string]float64{"loss": 0.5}
	first := record(t, s, c)
	if first.ID == 0 || !first.IsBest || first.Pruned {
		t.Fatalf("first record = %+v, want an id, best (the only scored one), not pruned", first)
	}
	// Same blob again, without a score: same row, score kept.
	c.ValidSharpe = nil
	again := record(t, s, c)
	if again.ID != first.ID || again.ValidSharpe == nil || *again.ValidSharpe != 0.7 || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("retry = %+v, want the first row unchanged", again)
	}
	// Another blob at the same epoch (re-trained after a resume): the row
	// describes it, and the old score is gone with the old weights.
	c2 := checkpointAt("r", 1, "weights v2")
	replaced := record(t, s, c2)
	if replaced.ID != first.ID || replaced.SHA256 != sha("weights v2") || replaced.Bytes != int64(len("weights v2")) ||
		replaced.ValidSharpe != nil || replaced.IsBest {
		t.Fatalf("re-trained epoch = %+v, want the new sha and bytes, no score, not best", replaced)
	}
	if n := count(t, s, "checkpoints", "run_id = 'r'"); n != 1 {
		t.Fatalf("%d checkpoint rows, want 1", n)
	}
	// Upper-case hex is accepted and stored lower-case; anything else is not hex.
	c3 := checkpointAt("r", 2, "x")
	c3.SHA256 = "ABCDEF" + c3.SHA256[6:]
	if got := record(t, s, c3); got.SHA256 != "abcdef"+c3.SHA256[6:] {
		t.Fatalf("sha256 stored as %s", got.SHA256)
	}
	bad := checkpointAt("r", 3, "x")
	bad.SHA256 = "xyz"
	_, err := s.RecordCheckpoint(ctx, bad)
	wantErrIs(t, err, metadata.ErrInvalid)
	_, err = s.RecordCheckpoint(ctx, checkpointAt("missing", 1, "x"))
	wantErrIs(t, err, metadata.ErrNotFound)
}

func testLatestCheckpointSkipsPruned(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	_, err := s.LatestCheckpoint(ctx, "r")
	wantErrIs(t, err, metadata.ErrNotFound)

	record(t, s, checkpointAt("r", 1, "a"))
	record(t, s, checkpointAt("r", 2, "b"))
	c3 := record(t, s, checkpointAt("r", 3, "c"))
	latest, err := s.LatestCheckpoint(ctx, "r")
	if err != nil || latest.Epoch != 3 {
		t.Fatalf("LatestCheckpoint = epoch %d, %v; want 3", latest.Epoch, err)
	}
	if err := s.MarkPruned(ctx, []int64{c3.ID}); err != nil {
		t.Fatal(err)
	}
	if latest, err = s.LatestCheckpoint(ctx, "r"); err != nil || latest.Epoch != 2 {
		t.Fatalf("LatestCheckpoint after pruning epoch 3 = epoch %d, %v; want 2", latest.Epoch, err)
	}
	// Writing the blob of epoch 3 again brings it back.
	if back := record(t, s, checkpointAt("r", 3, "c")); back.Pruned || back.PrunedAt != nil {
		t.Fatalf("re-recorded epoch 3 = %+v, want unpruned", back)
	}
	if latest, _ = s.LatestCheckpoint(ctx, "r"); latest.Epoch != 3 {
		t.Fatalf("LatestCheckpoint = epoch %d, want 3", latest.Epoch)
	}
	got, err := s.GetCheckpoint(ctx, "r", 2)
	if err != nil || got.SHA256 != sha("b") {
		t.Fatalf("GetCheckpoint(r, 2) = %+v, %v", got, err)
	}
	_, err = s.GetCheckpoint(ctx, "r", 9)
	wantErrIs(t, err, metadata.ErrNotFound)
}

// TestRetentionKeepsLastAndBest checks a hand-worked case: epochs 1..8 with
// validation Sharpe 0.5, 1.2, -, 0.9, 1.2, -0.3, 0.1, -; keep the last 3
// (6, 7, 8) and the best 2 (2 and 5 tie at 1.2; 2 is earlier, 5 is second),
// so 1, 3 and 4 go.
func testRetentionKeepsLastAndBest(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	scores := []*float64{ptr(0.5), ptr(1.2), nil, ptr(0.9), ptr(1.2), ptr(-0.3), ptr(0.1), nil}
	for i, sc := range scores {
		c := checkpointAt("r", i+1, fmt.Sprint("weights ", i+1))
		c.ValidSharpe = sc
		record(t, s, c)
	}
	best, err := s.BestCheckpoint(ctx, "r")
	if err != nil || best.Epoch != 2 {
		t.Fatalf("BestCheckpoint = epoch %d, %v; want 2 (first of the tie at 1.2)", best.Epoch, err)
	}

	prune, err := s.Retention(ctx, "r", 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := epochsOf(prune); !slices.Equal(got, []int{1, 3, 4}) {
		t.Fatalf("Retention(keep last 3, best 2) = epochs %v, want [1 3 4]", got)
	}
	// The caller deletes the blobs, then marks; a retry of the whole step
	// (the activity failed after marking) finds nothing more to do.
	for range 2 {
		if err := s.MarkPruned(ctx, idsOf(prune)); err != nil {
			t.Fatal(err)
		}
	}
	again, err := s.Retention(ctx, "r", 3, 2)
	if err != nil || len(again) != 0 {
		t.Fatalf("Retention after pruning = epochs %v, %v; want none", epochsOf(again), err)
	}
	all, err := s.ListCheckpoints(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var pruned []int
	for _, c := range all {
		if c.Pruned != (c.PrunedAt != nil) {
			t.Fatalf("epoch %d: pruned %v but pruned_at %v", c.Epoch, c.Pruned, c.PrunedAt)
		}
		if c.Pruned {
			pruned = append(pruned, c.Epoch)
		}
	}
	if !slices.Equal(pruned, []int{1, 3, 4}) || len(all) != 8 {
		t.Fatalf("pruned epochs %v of %d, want [1 3 4] of 8", pruned, len(all))
	}

	// Epoch 9 arrives (score 0): the last 3 are now 7, 8, 9; 6 goes.
	c9 := checkpointAt("r", 9, "weights 9")
	c9.ValidSharpe = ptr(0.0)
	record(t, s, c9)
	prune, err = s.Retention(ctx, "r", 3, 2)
	if err != nil || !slices.Equal(epochsOf(prune), []int{6}) {
		t.Fatalf("Retention after epoch 9 = epochs %v, %v; want [6]", epochsOf(prune), err)
	}

	// keep_best 0: only the last 3 stay; the best flag moves to the best
	// checkpoint left once 2 and 5 are pruned.
	prune, err = s.Retention(ctx, "r", 3, 0)
	if err != nil || !slices.Equal(epochsOf(prune), []int{2, 5, 6}) {
		t.Fatalf("Retention(keep last 3, best 0) = epochs %v, %v; want [2 5 6]", epochsOf(prune), err)
	}
	if err := s.MarkPruned(ctx, idsOf(prune)); err != nil {
		t.Fatal(err)
	}
	if best, err = s.BestCheckpoint(ctx, "r"); err != nil || best.Epoch != 7 {
		t.Fatalf("BestCheckpoint after pruning the best = epoch %d, %v; want 7 (0.1)", best.Epoch, err)
	}

	_, err = s.Retention(ctx, "r", 0, 1)
	wantErrIs(t, err, metadata.ErrInvalid)
	_, err = s.Retention(ctx, "missing", 1, 1)
	wantErrIs(t, err, metadata.ErrNotFound)
	wantErrIs(t, s.MarkPruned(ctx, []int64{best.ID, 999999}), metadata.ErrNotFound)
	if b, _ := s.BestCheckpoint(ctx, "r"); b.Pruned {
		t.Fatal("a MarkPruned call with an unknown id pruned the others")
	}
}

func testMarkPrunedKeepsFirstPrunedAt(t *testing.T, s Metadata) {
	ctx := context.Background()
	newRun(t, s, metadata.NewRun{RunID: "r"})
	c := record(t, s, checkpointAt("r", 1, "a"))
	if err := s.MarkPruned(ctx, []int64{c.ID}); err != nil {
		t.Fatal(err)
	}
	first, _ := s.GetCheckpoint(ctx, "r", 1)
	if err := s.MarkPruned(ctx, []int64{c.ID, c.ID}); err != nil {
		t.Fatal(err)
	}
	second, _ := s.GetCheckpoint(ctx, "r", 1)
	if first.PrunedAt == nil || !second.PrunedAt.Equal(*first.PrunedAt) {
		t.Fatalf("pruned_at %v then %v, want the first kept", first.PrunedAt, second.PrunedAt)
	}
}

func testCheckpointJSONNamesEpochURIAndSHA256(t *testing.T, s Metadata) {
	newRun(t, s, metadata.NewRun{RunID: "r"})
	record(t, s, checkpointAt("r", 1, "a"))
	cps, err := s.ListCheckpoints(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(cps)
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	if err := json.Unmarshal(raw, &items); err != nil || len(items) != 1 {
		t.Fatalf("checkpoint JSON %s is not an array of one object: %v", raw, err)
	}
	if items[0]["epoch"] != 1.0 || items[0]["uri"] != "file:///ck/r/0001.safetensors" || items[0]["sha256"] != sha("a") {
		t.Fatalf("checkpoint JSON = %s, want epoch, uri and sha256", raw)
	}
	// No checkpoints yet is an empty array, not null.
	newRun(t, s, metadata.NewRun{RunID: "empty"})
	none, err := s.ListCheckpoints(context.Background(), "empty")
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(none); string(raw) != "[]" {
		t.Fatalf("no checkpoints as JSON = %s, want []", raw)
	}
}
