package activities_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/checkpoint/bucket"
	"github.com/dqnflow/dqnflow/checkpoint/s3test"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
)

func newControl(t *testing.T) (*activities.Control, *store.SQLite, *testsuite.TestActivityEnvironment) {
	t.Helper()
	st := activitiestest.NewStore(t)
	c := &activities.Control{Store: st, Checkpoints: checkpoint.Local(os.TempDir())} // every t.TempDir is inside
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(c)
	return c, st, env
}

// seedCheckpoints records checkpoints of epochs 1..len(sharpes) with blobs
// under dir and the given validation Sharpe ratios.
func seedCheckpoints(t *testing.T, st *store.SQLite, dir string, sharpes []float64) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateRun(ctx, metadata.NewRun{RunID: runID, Config: testConfig().JSON()}); err != nil {
		t.Fatal(err)
	}
	var uris []string
	for i, s := range sharpes {
		e := i + 1
		uri := filepath.Join(dir, fmt.Sprintf("epoch-%06d.safetensors", e))
		if err := os.WriteFile(uri, []byte("blob"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordCheckpoint(ctx, metadata.CheckpointRecord{RunID: runID, Epoch: e, URI: uri, SHA256: fmt.Sprintf("%064d", e)}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordBacktest(ctx, metadata.BacktestRecord{RunID: runID, Epoch: e, Split: metadata.SplitValid, Sharpe: &s, DataFrom: validFrom, DataTo: validFrom}); err != nil {
			t.Fatal(err)
		}
		uris = append(uris, uri)
	}
	return uris
}

// TestRetentionDeletesNothingOutsideTheCheckpointRoot records checkpoint
// rows whose files lie outside the control worker's checkpoint root, as a
// tampered or foreign row would, and checks that retention deletes none of
// them, marks none pruned, and fails with an error that names the file.
func TestRetentionDeletesNothingOutsideTheCheckpointRoot(t *testing.T) {
	c, st, env := newControl(t)
	root := filepath.Join(t.TempDir(), "root")
	c.Checkpoints = checkpoint.Local(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	uris := seedCheckpoints(t, st, t.TempDir(), []float64{0.1, 0.2, 0.3})
	_, err := env.ExecuteActivity(c.ApplyRetention, activities.RetentionInput{RunID: runID, KeepLast: 1, KeepBest: 1})
	if err == nil || !strings.Contains(err.Error(), uris[0]) || !strings.Contains(err.Error(), "outside the checkpoint root") {
		t.Fatalf("retention of files outside the root: %v, want an error naming %s", err, uris[0])
	}
	for _, u := range uris {
		if _, err := os.Stat(u); err != nil {
			t.Errorf("%s was deleted: %v", u, err)
		}
	}
	for e := 1; e <= len(uris); e++ {
		if row, _ := st.GetCheckpoint(context.Background(), runID, e); row.Pruned {
			t.Errorf("checkpoint of epoch %d marked pruned", e)
		}
	}
}

func TestRetentionKeepsLastBestAndProtected(t *testing.T) {
	c, st, env := newControl(t)
	dir := t.TempDir()
	// Epoch 2 is the best; epoch 5 the last; epoch 3 is protected by the
	// caller; epoch 1's blob is already gone (a retry after a partial run).
	uris := seedCheckpoints(t, st, dir, []float64{0.1, 0.9, 0.2, 0.3, 0.4})
	if err := os.Remove(uris[0]); err != nil {
		t.Fatal(err)
	}
	v, err := env.ExecuteActivity(c.ApplyRetention, activities.RetentionInput{RunID: runID, KeepLast: 1, KeepBest: 1, Keep: []string{uris[2]}})
	if err != nil {
		t.Fatal(err)
	}
	var out activities.RetentionOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	var pruned []int
	for _, p := range out.Pruned {
		pruned = append(pruned, p.Epoch)
	}
	if !slices.Equal(pruned, []int{1, 4}) {
		t.Fatalf("pruned epochs %v, want [1 4]", pruned)
	}
	for i, uri := range uris {
		e := i + 1
		_, statErr := os.Stat(uri)
		row, _ := st.GetCheckpoint(context.Background(), runID, e)
		gone := e == 1 || e == 4
		if gone != errors.Is(statErr, os.ErrNotExist) || gone != row.Pruned {
			t.Errorf("epoch %d: blob exists %v, row pruned %v; want pruned %v", e, statErr == nil, row.Pruned, gone)
		}
	}
}

func TestRetentionRefusesWhenTheStorageIsNotVisible(t *testing.T) {
	c, st, env := newControl(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seedCheckpoints(t, st, dir, []float64{0.1, 0.2})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := env.ExecuteActivity(c.ApplyRetention, activities.RetentionInput{RunID: runID, KeepLast: 1}); err == nil {
		t.Fatal("retention succeeded although the checkpoint directory is not there")
	}
	if row, _ := st.GetCheckpoint(context.Background(), runID, 1); row.Pruned {
		t.Error("a checkpoint whose blob could not be deleted was marked pruned")
	}
}

func TestFirstPromotionDecisionStands(t *testing.T) {
	c, st, env := newControl(t)
	if _, err := st.CreateRun(context.Background(), metadata.NewRun{RunID: "ch", Lineage: "l", Config: testConfig().JSON()}); err != nil {
		t.Fatal(err)
	}
	in := activities.PromotionInput{RetrainID: "rt", Lineage: "l", Challenger: activities.CheckpointRef{RunID: "ch", URI: "/c"}, Promoted: true, Reason: "first"}
	if _, err := env.ExecuteActivity(c.RecordPromotion, in); err != nil {
		t.Fatal(err)
	}
	in.Promoted, in.Reason = false, "second"
	v, err := env.ExecuteActivity(c.RecordPromotion, in)
	if err != nil {
		t.Fatal(err)
	}
	var out activities.PromotionOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if !out.Promoted || out.Reason != "first" {
		t.Errorf("second decision returned %+v, want the first one (promoted, first)", out)
	}
	v, err = env.ExecuteActivity(c.LookupChampion, activities.ChampionInput{Lineage: "l"})
	if err != nil {
		t.Fatal(err)
	}
	var ch activities.ChampionOutput
	if err := v.Get(&ch); err != nil {
		t.Fatal(err)
	}
	if !ch.Found || ch.RunID != "ch" || ch.Checkpoint.URI != "/c" {
		t.Errorf("champion %+v, want run ch at /c", ch)
	}
}

func TestStoreRejectionIsFatal(t *testing.T) {
	c, _, env := newControl(t)
	_, err := env.ExecuteActivity(c.SetRunStatus, activities.SetStatusInput{RunID: "no-such-run", Status: metadata.StatusRunning})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrTypeStoreRejected || !ae.NonRetryable() || !activities.IsFatal(err) {
		t.Fatalf("status of a missing run: %v, want a non-retryable %s error", err, activities.ErrTypeStoreRejected)
	}
}

// validFrom is the time of the seeded backtests' validation range.
var validFrom = time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)

// TestRetentionDeletesTheObjectsOfAnS3Store keeps the last and the best
// of four checkpoints written to a bucket of a real S3 server (versitygw):
// the other two objects are deleted and their rows marked pruned, the kept
// ones still read back with their recorded hashes.
func TestRetentionDeletesTheObjectsOfAnS3Store(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	ctx := context.Background()
	objects, err := checkpoint.OpenStore(ctx, srv.URL("retention"), checkpoint.Options{Buckets: bucket.OpenS3})
	if err != nil {
		t.Fatal(err)
	}
	defer objects.Close()
	c, st, env := newControl(t)
	c.Checkpoints = objects
	if _, err := st.CreateRun(ctx, metadata.NewRun{RunID: runID, Config: testConfig().JSON()}); err != nil {
		t.Fatal(err)
	}
	var uris, sums []string
	for i, sharpe := range []float64{0.1, 0.9, 0.2, 0.3} {
		e := i + 1
		uri, err := objects.Locate(fmt.Sprintf("checkpoints/%s/epoch-%06d.safetensors", runID, e))
		if err != nil {
			t.Fatal(err)
		}
		ck := &checkpoint.Checkpoint{Meta: map[string]string{checkpoint.MetaEpoch: fmt.Sprint(e)},
			Tensors: []checkpoint.Tensor{checkpoint.F32Tensor("w", []int{1}, []float32{float32(e)})}}
		info, err := objects.Write(ctx, uri, ck)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordCheckpoint(ctx, metadata.CheckpointRecord{RunID: runID, Epoch: e, URI: uri, SHA256: info.SHA256, Bytes: info.Bytes}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordBacktest(ctx, metadata.BacktestRecord{RunID: runID, Epoch: e, Split: metadata.SplitValid, Sharpe: &sharpe, DataFrom: validFrom, DataTo: validFrom}); err != nil {
			t.Fatal(err)
		}
		uris, sums = append(uris, uri), append(sums, info.SHA256)
	}
	if _, err := env.ExecuteActivity(c.ApplyRetention, activities.RetentionInput{RunID: runID, KeepLast: 1, KeepBest: 1}); err != nil {
		t.Fatal(err)
	}
	for i, uri := range uris {
		e := i + 1
		_, _, readErr := objects.Read(ctx, uri, sums[i])
		row, _ := st.GetCheckpoint(ctx, runID, e)
		gone := e == 1 || e == 3
		if gone != errors.Is(readErr, fs.ErrNotExist) || (!gone && readErr != nil) || gone != row.Pruned {
			t.Errorf("epoch %d: read %v, row pruned %v; want pruned %v", e, readErr, row.Pruned, gone)
		}
	}
}
