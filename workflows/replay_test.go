package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/worker"
	"github.com/dqnflow/dqnflow/worker/workertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// Regenerate the recorded histories after an intended change of the
// workflows' commands (and guard running workflows with workflow.GetVersion):
//
//	go test ./workflows -run TestRecordHistories -record
var record = flag.Bool("record", false, "run the workflows on a Temporal dev server and save their histories under testdata/")

// recordOptions are the workflow options the histories were recorded with;
// a replay must use the same ones.
var recordOptions = workflows.Options{ContinueAsNewEvery: 4}

// TestReplayRecordedHistories replays every history under testdata/ with the
// current workflow code: a change that alters the commands a recorded
// workflow issues (a non-deterministic change) fails it.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories under testdata/; record them with: go test ./workflows -run TestRecordHistories -record")
	}
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := sdkworker.NewWorkflowReplayer()
			wf := &workflows.Workflows{Options: recordOptions}
			r.RegisterWorkflowWithOptions(wf.TrainingRun, workflow.RegisterOptions{Name: workflows.TrainingRunName})
			r.RegisterWorkflowWithOptions(wf.Retrain, workflow.RegisterOptions{Name: workflows.RetrainName})
			r.RegisterWorkflowWithOptions(wf.Sweep, workflow.RegisterOptions{Name: workflows.SweepName})
			h, err := readHistory(f)
			if err != nil {
				t.Fatal(err)
			}
			// The file is named <workflow id>.<part>.json: child workflow ids
			// derive from the workflow id, so the replay needs the original.
			id, _, _ := strings.Cut(filepath.Base(f), ".")
			if err := r.ReplayWorkflowHistoryWithOptions(logger, h, sdkworker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: id},
			}); err != nil {
				t.Fatalf("replay %s: %v\n(if the workflow change is intended, record the histories again: go test ./workflows -run TestRecordHistories -record)", f, err)
			}
		})
	}
}

// TestRecordHistories runs a TrainingRun through every branch that a
// history can hold (a failed step and its recovery, pause and resume,
// Continue-As-New, completion), a Retrain and a Sweep on a dev server,
// with the real activities over the fake trainer backend and an in-memory
// store, and saves their histories under testdata/.
func TestRecordHistories(t *testing.T) {
	if !*record {
		t.Skip("records histories only with -record")
	}
	c := workertest.DevServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var failed, paused atomic.Bool
	b := &activitiestest.Backend{
		// The first attempt at epoch 2 fails part-way (a recovery).
		TrainErr: func(step int64) error {
			if step == 10 && failed.CompareAndSwap(false, true) {
				return errors.New("injected device error")
			}
			return nil
		},
		// A pause arrives during epoch 3.
		BeforeStep: func(ctx context.Context, step int64) error {
			if step == 25 && paused.CompareAndSwap(false, true) {
				return c.SignalWorkflow(ctx, "record-run", "", workflows.PauseSignal, nil)
			}
			return nil
		},
	}
	w, err := worker.New(c, worker.Config{
		Role: worker.RoleAll, Slots: 2, Store: activitiestest.NewMemStore(), Backend: b,
		Prepare: activitiestest.Dataset, CheckpointRoot: t.TempDir(), Workflows: recordOptions,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())

	cfg := config.Defaults()
	cfg.Epochs, cfg.StepsPerEpoch, cfg.Env.NumEnvs, cfg.Env.CollectSteps = 6, 10, 2, 4
	cfg.Checkpoint.Every, cfg.Backtest.Every, cfg.Checkpoint.KeepLast = 2, 1, 2
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-run", TaskQueue: workflows.ControlTaskQueue},
		workflows.TrainingRunName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	firstRunID := run.GetRunID() // Get follows the Continue-As-New and moves the run id on
	waitForStatus(ctx, t, c, "record-run", store.StatusPaused)
	if err := c.SignalWorkflow(ctx, "record-run", "", workflows.ResumeSignal, nil); err != nil {
		t.Fatal(err)
	}
	var res workflows.RunResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != store.StatusCompleted || res.Epochs != 6 || res.Recoveries != 0 {
		t.Fatalf("run result %+v", res)
	}
	saveHistory(ctx, t, c, "record-run", firstRunID, "record-run.first.json")
	saveHistory(ctx, t, c, "record-run", "", "record-run.continued.json")

	small := cfg
	small.Epochs, small.Checkpoint.Every = 2, 1
	rt, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-retrain", TaskQueue: workflows.ControlTaskQueue},
		workflows.RetrainName, workflows.RetrainInput{Lineage: "record", Config: small})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	saveHistory(ctx, t, c, "record-retrain", "", "record-retrain.json")

	sw, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-sweep", TaskQueue: workflows.ControlTaskQueue},
		workflows.SweepName, workflows.SweepInput{Base: small, Grid: map[string][]json.RawMessage{"seed": raw("1", "2", "3")}, MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	saveHistory(ctx, t, c, "record-sweep", "", "record-sweep.json")
}

func readHistory(path string) (*historypb.History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return client.HistoryFromJSON(f, client.HistoryJSONOptions{})
}

// waitForStatus polls the run's progress query until it reports status.
func waitForStatus(ctx context.Context, t *testing.T, c client.Client, id string, status store.Status) {
	t.Helper()
	for {
		v, err := c.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
		if err == nil {
			var p workflows.Progress
			if err := v.Get(&p); err == nil && p.Status == status {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s never reached status %s", id, status)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func saveHistory(ctx context.Context, t *testing.T, c client.Client, id, runID, name string) {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved %d events of %s to testdata/%s", len(h.Events), id, name)
}
