package worker_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/worker"
	"github.com/dqnflow/dqnflow/worker/workertest"
	"github.com/dqnflow/dqnflow/workflows"
)

func TestSearchAttributeFlagsNameEveryAttribute(t *testing.T) {
	want := []string{
		"--search-attribute", "DqnBestValidSharpe=Double",
		"--search-attribute", "DqnEpoch=Int",
		"--search-attribute", "DqnStatus=Keyword",
	}
	if got := worker.SearchAttributeFlags(); !slices.Equal(got, want) {
		t.Errorf("flags %v, want %v", got, want)
	}
}

// startWorker makes a worker of cfg on c and starts it; the caller stops it.
func startWorker(t *testing.T, c client.Client, cfg worker.Config) *worker.Worker {
	t.Helper()
	w, err := worker.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestEnsureSearchAttributesRegistersThemOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	c := workertest.DevServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		if err := worker.EnsureSearchAttributes(ctx, c, "default"); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range workflows.SearchAttributes {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != typ {
			t.Errorf("search attribute %s registered as %v (%v), want %v", name, got, ok, typ)
		}
	}
}

// referenceWeight is the fake trainer's weight after steps uninterrupted
// gradient steps: w₀ = 1, w_k = w_{k−1}·0.5 + k, in float32.
func referenceWeight(steps int64) float32 {
	w := float32(1)
	for k := int64(1); k <= steps; k++ {
		w = w*0.5 + float32(k)
	}
	return w
}

// TestRunMovesToAnotherWorkerWhenItsWorkerStops runs a real TrainingRun on a
// dev server through the real activities (fake trainer backend, in-memory
// store). Its GPU worker stops in the middle of epoch 2; the run must move to
// a second worker, restore the epoch 1 checkpoint there, and end with the
// weights of an uninterrupted run.
func TestRunMovesToAnotherWorkerWhenItsWorkerStops(t *testing.T) {
	moveRun(t, false)
}

// TestRunKeepsTheCheckpointItsStoppingWorkerWasWriting is the same move
// with the epoch 1 checkpoint still being written when the worker stops:
// its row is held until the stop has begun, and half a second more. The
// stopping worker must end its chunk and wait for that row before its
// session ends (activities.Trainer.Drain), and the run must restore that
// checkpoint, not start again from nothing.
func TestRunKeepsTheCheckpointItsStoppingWorkerWasWriting(t *testing.T) {
	moveRun(t, true)
}

func moveRun(t *testing.T, holdRow bool) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	c := workertest.DevServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := workertest.MoveRun(t, c, workertest.Move{
		ID: "moves", Epochs: 4, HoldRow: holdRow,
		Workflows: workflows.Options{SessionHeartbeatTimeout: 2 * time.Second, HeartbeatTimeout: 5 * time.Second},
	})
	res, st, second := m.Result, m.Store, m.Second
	if res.Status != metadata.StatusCompleted || res.Epochs != 4 || res.GlobalStep != 40 || res.LastCheckpoint.Epoch != 4 {
		t.Fatalf("result %+v, want completed after 4 epochs (40 steps)", res)
	}
	news, restores := second.Counts()
	if news != 0 || restores != 1 {
		t.Fatalf("second worker built %d and restored %d trainers, want one restore", news, restores)
	}
	tr := second.Trainers()[0]
	if want := referenceWeight(40); math.Float32bits(tr.W) != math.Float32bits(want) {
		t.Errorf("final weight %v, want %v (uninterrupted run)", tr.W, want)
	}
	for e := 1; e <= 4; e++ {
		if ck, err := st.GetCheckpoint(ctx, "moves", e); err != nil || ck.Epoch != e || ck.GlobalStep != int64(10*e) {
			t.Errorf("checkpoint row of epoch %d: %+v (%v)", e, ck, err)
		}
	}
	if r, err := st.GetRun(ctx, "moves"); err != nil || r.Status != metadata.StatusCompleted || r.Backend != "fake" {
		t.Errorf("run row %+v (%v), want completed on the fake backend", r, err)
	}
}

// TestReusedWorkflowIDKeepsTheFirstRunsRowsAndFiles runs two TrainingRuns
// one after the other under the same workflow id, as the Temporal UI
// allows, on a dev server with the real metadata store: the second must
// get rows and checkpoint files of its own, and the first run's row,
// checkpoint rows and files (which a champion may point at) must stay as
// they were.
func TestReusedWorkflowIDKeepsTheFirstRunsRowsAndFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	c := workertest.DevServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st := activitiestest.NewPostgresStore(t, "dqnflow_worker")
	w := startWorker(t, c, worker.Config{
		Role: worker.RoleAll, Slots: 1, Store: st, Backend: &activitiestest.Backend{}, Prepare: activitiestest.Dataset,
		Checkpoints: checkpoint.Local(t.TempDir()), HeartbeatInterval: 100 * time.Millisecond,
	})
	defer w.Stop(context.Background())

	run := func(seed uint64, epochs int) workflows.RunResult {
		t.Helper()
		cfg := config.Defaults()
		cfg.Seed, cfg.Epochs, cfg.StepsPerEpoch, cfg.Env.NumEnvs, cfg.Env.CollectSteps = seed, epochs, 10, 2, 4
		cfg.Checkpoint.Every, cfg.Backtest.Every, cfg.Checkpoint.KeepLast = 1, 1, 10
		wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "again", TaskQueue: workflows.ControlTaskQueue},
			workflows.TrainingRunName, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var res workflows.RunResult
		if err := wr.Get(ctx, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := run(1, 2)
	before, err := st.ListCheckpoints(ctx, first.RunID)
	if err != nil || len(before) != 2 {
		t.Fatalf("first run %s: checkpoints %v, %v; want 2", first.RunID, before, err)
	}
	second := run(2, 3)
	if first.RunID != "again" || second.RunID == first.RunID || !strings.HasPrefix(second.RunID, "again.") {
		t.Fatalf("run ids %q and %q, want again and again.<execution id>", first.RunID, second.RunID)
	}
	row, err := st.GetRun(ctx, "again")
	if err != nil || row.Status != metadata.StatusCompleted || row.EpochsDone != 2 || !strings.Contains(string(row.Config), `"seed": 1`) && !strings.Contains(string(row.Config), `"seed":1`) {
		t.Errorf("first run's row after the second run: %+v, %v; want it unchanged (2 epochs, seed 1)", row, err)
	}
	after, err := st.ListCheckpoints(ctx, "again")
	if err != nil || len(after) != len(before) {
		t.Fatalf("first run's checkpoints after the second run: %v, %v", after, err)
	}
	for i, ck := range after {
		if ck.URI != before[i].URI || ck.SHA256 != before[i].SHA256 {
			t.Errorf("checkpoint row %d changed: %+v, was %+v", i, ck, before[i])
		}
		if _, _, err := checkpoint.ReadVerified(context.Background(), ck.URI, ck.SHA256, checkpoint.Options{}); err != nil {
			t.Errorf("first run's checkpoint file: %v", err)
		}
	}
	theirs, err := st.ListCheckpoints(ctx, second.RunID)
	if err != nil || len(theirs) != 3 || filepath.Dir(theirs[0].URI) == filepath.Dir(before[0].URI) {
		t.Errorf("second run's checkpoints %v, %v; want 3 in a directory of their own", theirs, err)
	}
}
