package workertest

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/worker"
	"github.com/dqnflow/dqnflow/workflows"
)

// Move is a TrainingRun that moves between GPU workers (MoveRun).
type Move struct {
	ID     string // workflow id
	Epochs int    // of 10 steps each, checkpointed every epoch
	// Workflows are the control worker's options.
	Workflows workflows.Options
	// HoldRow holds the row of the epoch 1 checkpoint until the first
	// worker's stop has begun, and half a second more
	// (activitiestest.HeldCheckpointRow): the checkpoint is still being
	// written when the worker stops.
	HoldRow bool
}

// Moved is what MoveRun leaves for the test to check.
type Moved struct {
	Result workflows.RunResult
	Store  *store.SQLite           // the run's metadata
	Second *activitiestest.Backend // the second worker's trainers
}

// MoveRun runs m on a dev server through the real activities (fake trainer
// backend, the tests' store): a control worker, and a GPU worker that stops
// half-way through epoch 2, in the middle of its chunk, once a second GPU
// worker serves. It waits for the run to end and returns the result; the
// workers stop when the test ends.
func MoveRun(t *testing.T, c client.Client, m Move) Moved {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := activitiestest.NewStore(t)
	root := t.TempDir()
	start := func(role worker.Role, b *activitiestest.Backend, st activities.Store) *worker.Worker {
		w, err := worker.New(c, worker.Config{
			Role: role, Slots: 1, Store: st, Backend: b, Prepare: activitiestest.Dataset,
			Checkpoints: checkpoint.Local(root), StopTimeout: 5 * time.Second, Workflows: m.Workflows,
			HeartbeatInterval: 100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	control := start(worker.RoleControl, nil, st)
	t.Cleanup(func() { control.Stop(context.Background()) })

	reached, stopping := make(chan struct{}), make(chan struct{})
	first := &activitiestest.Backend{BeforeStep: func(ctx context.Context, step int64) error {
		if step == 15 { // half-way through epoch 2: wait here until the worker ends the chunk
			close(reached)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	var st1 activities.Store = st
	if m.HoldRow {
		st1 = &activitiestest.HeldCheckpointRow{SQLite: st, Epoch: 1, Release: stopping, Delay: 500 * time.Millisecond}
	}
	gpu1 := start(worker.RoleGPU, first, st1)

	cfg := config.Defaults()
	cfg.Epochs, cfg.StepsPerEpoch, cfg.Env.NumEnvs, cfg.Env.CollectSteps = m.Epochs, 10, 2, 4
	cfg.Checkpoint.Every, cfg.Backtest.Every = 1, 2
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: m.ID, TaskQueue: workflows.ControlTaskQueue},
		workflows.TrainingRunName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-ctx.Done():
		t.Fatal("the run never reached epoch 2 on the first worker")
	}
	second := &activitiestest.Backend{}
	gpu2 := start(worker.RoleGPU, second, st)
	t.Cleanup(func() { gpu2.Stop(context.Background()) })
	close(stopping)
	if err := gpu1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var res workflows.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return Moved{Result: res, Store: st, Second: second}
}
