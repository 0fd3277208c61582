package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/worker"
	"github.com/dqnflow/dqnflow/worker/workertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestSlotIsKeptAcrossContinueAsNew runs two runs on a GPU worker with one
// slot, the second queued behind the first, on a dev server. The first
// continues as new after every two epochs: its new run must get the slot
// back at once and reuse the trainer it left in memory, not lose the slot
// to the queued run and wait for it to finish (or restore its checkpoint
// elsewhere, while its old trainer sat in memory).
func TestSlotIsKeptAcrossContinueAsNew(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	c := workertest.DevServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		steps []string // the workflow id of each gradient step, in order
	)
	b := &activitiestest.Backend{BeforeStep: func(ctx context.Context, _ int64) error {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, activity.GetInfo(ctx).WorkflowExecution.ID)
		return nil
	}}
	w := startWorker(t, c, worker.Config{
		Role: worker.RoleAll, Slots: 1, Store: activitiestest.NewStore(t), Backend: b, Prepare: activitiestest.Dataset,
		Checkpoints: checkpoint.Local(t.TempDir()), HeartbeatInterval: 100 * time.Millisecond,
		Workflows: workflows.Options{ContinueAsNewEvery: 2, RecreateTimeout: 5 * time.Second},
	})
	defer w.Stop(context.Background())

	cfg := config.Defaults()
	cfg.Epochs, cfg.StepsPerEpoch, cfg.Env.NumEnvs, cfg.Env.CollectSteps = 6, 10, 2, 4
	cfg.Checkpoint.Every, cfg.Backtest.Every = 1, 1
	start := func(id string) client.WorkflowRun {
		t.Helper()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.ControlTaskQueue},
			workflows.TrainingRunName, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := start("first")
	waitForEpoch(ctx, t, c, "first", 1) // it holds the slot
	second := start("second")
	for _, r := range []client.WorkflowRun{first, second} {
		var res workflows.RunResult
		if err := r.Get(ctx, &res); err != nil {
			t.Fatal(err)
		}
		if res.Status != metadata.StatusCompleted || res.Epochs != 6 {
			t.Fatalf("run %s: %+v, want completed after 6 epochs", res.RunID, res)
		}
	}
	// The first run trained all its epochs before the second trained any,
	// with the one trainer it built.
	for i := 1; i < len(steps); i++ {
		if steps[i-1] == "second" && steps[i] == "first" {
			t.Fatalf("the first run trained again after the second had started (step %d of %d): "+
				"it lost its slot to the queued run when it continued as new", i, len(steps))
		}
	}
	if news, restores := b.Counts(); news != 2 || restores != 0 {
		t.Errorf("%d trainers built and %d restored, want 2 built (one per run) and none restored", news, restores)
	}
}

// waitForEpoch polls run id's progress until it has completed epoch e.
func waitForEpoch(ctx context.Context, t *testing.T, c client.Client, id string, e int) {
	t.Helper()
	for {
		if v, err := c.QueryWorkflow(ctx, id, "", workflows.ProgressQuery); err == nil {
			var p workflows.Progress
			if v.Get(&p) == nil && p.Epoch >= e {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s never completed epoch %d", id, e)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestStuckWorkflowGivesItsSlotBack lets a workflow open a session on a GPU
// worker with one slot, then fail every workflow task after it (as a
// non-determinism error after a bad deploy does): its session keeps
// heartbeating, and without a bound it would keep the slot for the
// session's execution timeout (7 days). The worker must end the idle
// session after its idle limit, so that a TrainingRun waiting for the slot
// gets it and completes.
func TestStuckWorkflowGivesItsSlotBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	c := workertest.DevServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := startWorker(t, c, worker.Config{
		Role: worker.RoleAll, Slots: 1, Store: activitiestest.NewStore(t), Backend: &activitiestest.Backend{},
		Prepare: activitiestest.Dataset, Checkpoints: checkpoint.Local(t.TempDir()), HeartbeatInterval: 100 * time.Millisecond,
		IdleTimeout: 2 * time.Second,
	})
	defer w.Stop(context.Background())

	cfg := config.Defaults()
	cfg.Epochs, cfg.StepsPerEpoch, cfg.Env.NumEnvs, cfg.Env.CollectSteps = 2, 10, 2, 4
	const queue = "stuck-test"
	opened := make(chan struct{})
	sw := sdkworker.New(c, queue, sdkworker.Options{})
	sw.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		gpu := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: workflows.GPUTaskQueue})
		sess, err := workflow.CreateSession(gpu, &workflow.SessionOptions{CreationTimeout: time.Minute, ExecutionTimeout: time.Hour, HeartbeatTimeout: 2 * time.Second})
		if err != nil {
			return err
		}
		sess = workflow.WithStartToCloseTimeout(sess, time.Minute)
		if err := workflow.ExecuteActivity(sess, "OpenTrainer", activities.OpenInput{RunID: "stuck", Config: cfg}).Get(ctx, nil); err != nil {
			return err
		}
		if !workflow.IsReplaying(ctx) {
			close(opened)
		}
		panic("a workflow task that fails for ever, like a non-determinism error")
	}, workflow.RegisterOptions{Name: "Stuck"})
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	defer sw.Stop()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "stuck", TaskQueue: queue}, "Stuck"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-opened:
	case <-ctx.Done():
		t.Fatal("the stuck workflow never opened its session")
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "waiting", TaskQueue: workflows.ControlTaskQueue},
		workflows.TrainingRunName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the run waiting for the stuck workflow's slot: %v", err)
	}
	if res.Status != metadata.StatusCompleted {
		t.Errorf("result %+v, want completed", res)
	}
}
