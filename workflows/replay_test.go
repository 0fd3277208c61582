package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/worker"
	"github.com/dqnflow/dqnflow/worker/workertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// Regenerate the recorded histories after an intended change of the
// workflows' commands (and guard running workflows with workflow.GetVersion):
//
//	go test ./workflows -run TestRecordHistories -record
//
// The histories of one scenario each have their own recorders, run the
// same way: TestRecordStoppedWorkerHistory (rec5),
// TestRecordWalkForwardHistory (rec6, with DATABASE_URL),
// TestWalkForwardResumesAStudyUnderItsID (rec7, with DATABASE_URL) and
// TestRecordRecommendationHistory (rec8).
var record = flag.Bool("record", false, "run the workflows on a Temporal dev server and save their histories under testdata/")

// recordParents also records Retrain and Sweep, as rec4-* (after
// retrain-needs-evidence; the fake backend evaluates its own checkpoints,
// activitiestest.Backend.Evaluate). The TrainingRun histories it records
// again on the way are those of rec3-*, which stand: keep the committed
// ones.
var recordParents = flag.Bool("record-parents", false, "with -record: also record Retrain and Sweep")

// recordOptions are the workflow options the histories were recorded with;
// a replay must use the same ones.
var recordOptions = workflows.Options{ContinueAsNewEvery: 4, ChunkBudget: time.Nanosecond}

// TestReplayRecordedHistories replays every history under testdata/ (the
// executions of the supported upgrade path, ADR 0046) with the current
// workflow code: a change that alters the commands a recorded workflow
// issues (a non-deterministic change) fails it.
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
			r.RegisterWorkflowWithOptions(wf.WalkForward, workflow.RegisterOptions{Name: workflows.WalkForwardName})
			r.RegisterWorkflowWithOptions(wf.WalkForwardWindow, workflow.RegisterOptions{Name: workflows.WalkForwardWindowName})
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

// TestRecordHistories runs, on a dev server with the real activities over
// the fake trainer backend and an in-memory store, the workflows through
// every branch that a GetVersion patch guarded (workflows/version.go) and
// saves their histories under testdata/ as rec3-*.json (recordOptions
// give each RunEpochs chunk one epoch, so that each signal lands at a
// known epoch):
//
//   - rec3-run: a failed step and its recovery, pause and resume,
//     Continue-As-New with the slot held for the next run, completion;
//   - rec3-resume: a resume that arrives during the pausing epoch's
//     backtest and cancels the pause;
//   - rec3-stop and rec3-cancel: a stop signal, and a cancellation in the
//     middle of an epoch (clean-up on the disconnected session);
//   - rec3-reuse: the second run under a used workflow id;
//   - with -record-parents, rec4-retrain and rec4-retrain2: Retrain
//     without a champion (evidence not asked for: promoted), then with one
//     (the challenger shows no edge at backtest.min_valid_t 2: not
//     promoted);
//   - rec4-sweep, rec4-sweep-cancel: a Sweep, and one cancelled while its
//     runs train (children asked to cancel and waited for).
//
// The histories of builds before the supported upgrade path (ADR 0046)
// are not kept: their executions are drained before an upgrade.
func TestRecordHistories(t *testing.T) {
	if !*record {
		t.Skip("records histories only with -record")
	}
	c := workertest.DevServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The hooks act on the scenario running now, named by workflow id.
	var (
		failed atomic.Bool
		signal = func(id, name string) {
			if err := c.SignalWorkflow(ctx, id, "", name, nil); err != nil {
				t.Error(err)
			}
		}
		atStep   sync.Map // workflow id -> func(step int64)
		atSharpe sync.Map // workflow id -> func(step int64); Backtest of that run
		current  atomic.Value
	)
	current.Store("")
	b := &activitiestest.Backend{
		// The first attempt at epoch 2 of rec3-run fails part-way (a recovery).
		TrainErr: func(step int64) error {
			if current.Load() == "rec3-run" && step == 10 && failed.CompareAndSwap(false, true) {
				return errors.New("injected device error")
			}
			return nil
		},
		BeforeStep: func(ctx context.Context, step int64) error {
			if f, ok := atStep.LoadAndDelete(fmt.Sprintf("%s@%d", activity.GetInfo(ctx).WorkflowExecution.ID, step)); ok {
				f.(func())()
			}
			return nil
		},
		Sharpe: func(step int64) float64 {
			if f, ok := atSharpe.LoadAndDelete(fmt.Sprintf("%s@%d", current.Load(), step)); ok {
				f.(func())()
			}
			return 1 - 1/float64(1+step)
		},
	}
	startWorker(t, c, worker.Config{
		Slots: 2, Store: activitiestest.NewStore(t), Backend: b,
		Prepare: activitiestest.Dataset, Evaluate: b.Evaluate, Checkpoints: checkpoint.Local(t.TempDir()),
	})

	cfg := config.Defaults()
	cfg.Epochs, cfg.StepsPerEpoch, cfg.Env.NumEnvs, cfg.Env.CollectSteps = 6, 10, 2, 4
	cfg.Checkpoint.Every, cfg.Backtest.Every, cfg.Checkpoint.KeepLast = 2, 1, 2
	start := func(id, name string, arg any) client.WorkflowRun {
		t.Helper()
		current.Store(id)
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.ControlTaskQueue}, name, arg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	result := func(r client.WorkflowRun, status metadata.Status, epochs int) workflows.RunResult {
		t.Helper()
		var res workflows.RunResult
		if err := r.Get(ctx, &res); err != nil {
			t.Fatal(err)
		}
		if res.Status != status || res.Epochs != epochs {
			t.Fatalf("run %s: %+v, want %s after %d epochs", res.RunID, res, status, epochs)
		}
		return res
	}

	// rec3-run: a pause during epoch 3, resumed once the run is paused.
	atStep.Store("rec3-run@25", func() { signal("rec3-run", workflows.PauseSignal) })
	run := start("rec3-run", workflows.TrainingRunName, cfg)
	firstRunID := run.GetRunID() // Get follows the Continue-As-New and moves the run id on
	waitForStatus(ctx, t, c, "rec3-run", metadata.StatusPaused)
	signal("rec3-run", workflows.ResumeSignal)
	result(run, metadata.StatusCompleted, 6)
	saveHistory(ctx, t, c, "rec3-run", firstRunID, "rec3-run.first.json")
	saveHistory(ctx, t, c, "rec3-run", "", "rec3-run.continued.json")

	// rec3-resume: pause during epoch 2, resume during its backtest.
	small := cfg
	small.Epochs = 3
	atStep.Store("rec3-resume@15", func() { signal("rec3-resume", workflows.PauseSignal) })
	atSharpe.Store("rec3-resume@20", func() { signal("rec3-resume", workflows.ResumeSignal) })
	result(start("rec3-resume", workflows.TrainingRunName, small), metadata.StatusCompleted, 3)
	saveHistory(ctx, t, c, "rec3-resume", "", "rec3-resume.json")

	// rec3-stop: stop during epoch 2.
	atStep.Store("rec3-stop@15", func() { signal("rec3-stop", workflows.StopSignal) })
	result(start("rec3-stop", workflows.TrainingRunName, small), metadata.StatusStopped, 2)
	saveHistory(ctx, t, c, "rec3-stop", "", "rec3-stop.json")

	// rec3-cancel: cancelled during epoch 2.
	atStep.Store("rec3-cancel@15", func() {
		if err := c.CancelWorkflow(ctx, "rec3-cancel", ""); err != nil {
			t.Error(err)
		}
	})
	if err := start("rec3-cancel", workflows.TrainingRunName, small).Get(ctx, nil); !temporal.IsCanceledError(err) {
		t.Fatalf("rec3-cancel ended with %v, want canceled", err)
	}
	saveHistory(ctx, t, c, "rec3-cancel", "", "rec3-cancel.json")

	// rec3-reuse: two runs under one workflow id; the second's history.
	tiny := cfg
	tiny.Epochs, tiny.Checkpoint.Every = 1, 1
	result(start("rec3-reuse", workflows.TrainingRunName, tiny), metadata.StatusCompleted, 1)
	if res := result(start("rec3-reuse", workflows.TrainingRunName, tiny), metadata.StatusCompleted, 1); !strings.HasPrefix(res.RunID, "rec3-reuse.") {
		t.Fatalf("second run under rec3-reuse recorded as %s", res.RunID)
	}
	saveHistory(ctx, t, c, "rec3-reuse", "", "rec3-reuse.second.json")

	if !*recordParents {
		return
	}
	// Retrain without, then with, a champion.
	two := cfg
	two.Epochs, two.Checkpoint.Every = 2, 1
	// The first without the evidence test (promoted: no champion), the
	// second with it (the fake's 21 validation bars give t ≈ 0.06: not
	// promoted, no edge).
	for i, id := range []string{"rec4-retrain", "rec4-retrain2"} {
		in := workflows.RetrainInput{Lineage: "record4", Config: two}
		if i == 0 {
			in.Config.Backtest.MinValidT = 0
		}
		var res workflows.RetrainResult
		if err := start(id, workflows.RetrainName, in).Get(ctx, &res); err != nil {
			t.Fatal(err)
		}
		if res.Promoted != (i == 0) {
			t.Fatalf("%s: %+v, want promoted = %v", id, res, i == 0)
		}
		saveHistory(ctx, t, c, id, "", id+".json")
	}

	// Sweeps: one to the end, one cancelled while its runs train.
	sweep := workflows.SweepInput{Base: two, Grid: map[string][]json.RawMessage{"seed": raw("1", "2", "3")}, MaxConcurrent: 2}
	if err := start("rec4-sweep", workflows.SweepName, sweep).Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	saveHistory(ctx, t, c, "rec4-sweep", "", "rec4-sweep.json")
	sweep.Base.Epochs = 50
	sw := start("rec4-sweep-cancel", workflows.SweepName, sweep)
	waitForStatus(ctx, t, c, childOf(ctx, t, c, "rec4-sweep-cancel"), metadata.StatusRunning)
	if err := c.CancelWorkflow(ctx, "rec4-sweep-cancel", ""); err != nil {
		t.Fatal(err)
	}
	if err := sw.Get(ctx, nil); !temporal.IsCanceledError(err) {
		t.Fatalf("rec4-sweep-cancel ended with %v, want canceled", err)
	}
	saveHistory(ctx, t, c, "rec4-sweep-cancel", "", "rec4-sweep-cancel.json")
}

// TestRecordStoppedWorkerHistory records rec5-moves (after
// stopped-worker-session-left): a TrainingRun whose GPU worker stops in
// the middle of epoch 2's chunk while a second one serves. The stopping
// worker ends the chunk (WorkerStopping), the run leaves its session to
// end with the worker, reopens on the second worker from the epoch 1
// checkpoint and ends there.
//
//	go test ./workflows -run TestRecordStoppedWorkerHistory -record
func TestRecordStoppedWorkerHistory(t *testing.T) {
	if !*record {
		t.Skip("records histories only with -record")
	}
	c := workertest.DevServer(t)
	m := workertest.MoveRun(t, c, workertest.Move{ID: "rec5-moves", Epochs: 3, Workflows: recordOptions})
	if news, restores := m.Second.Counts(); m.Result.Status != metadata.StatusCompleted || m.Result.Epochs != 3 || news != 0 || restores != 1 {
		t.Fatalf("result %+v, second worker built %d and restored %d trainers; want completed after 3 epochs, one restore", m.Result, news, restores)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	saveHistory(ctx, t, c, "rec5-moves", "", "rec5-moves.json")
}

// TestRecordRecommendationHistory records rec8-run (after
// run-records-recommendation): a TrainingRun of two epochs, as in
// TestRecordHistories (the fake backend, the in-memory store), that ends
// by recording its recommendation in its best checkpoint
// (RecordRecommendation).
//
//	go test ./workflows -run TestRecordRecommendationHistory -record
func TestRecordRecommendationHistory(t *testing.T) {
	if !*record {
		t.Skip("records histories only with -record")
	}
	c := workertest.DevServer(t)
	b := &activitiestest.Backend{}
	startWorker(t, c, worker.Config{
		Slots: 1, Store: activitiestest.NewStore(t), Backend: b,
		Prepare: activitiestest.Dataset, Evaluate: b.Evaluate, Checkpoints: checkpoint.Local(t.TempDir()),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := config.Defaults()
	cfg.Epochs, cfg.StepsPerEpoch, cfg.Env.NumEnvs, cfg.Env.CollectSteps = 2, 10, 2, 4
	cfg.Checkpoint.Every, cfg.Backtest.Every = 1, 1
	r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "rec8-run", TaskQueue: workflows.ControlTaskQueue}, workflows.TrainingRunName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.RunResult
	if err := r.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Recommendation == nil {
		t.Fatalf("rec8-run: %+v; want a recommendation recorded", res)
	}
	saveHistory(ctx, t, c, "rec8-run", "", "rec8-run.json")
}

// TestRecordWalkForwardHistory records rec6-walkforward: a WalkForward
// study on a dev server with the real activities (the CPU backend,
// walkforward's fixture series through a data root, PostgreSQL), the
// fixture study of TestWalkForwardOnRealActivitiesStoresTheStudyRunGives
// with one seed, its two windows trained one at a time. It saves the
// parent's history and each window's (rec6-walkforward-window-NNN.json).
// The series are named relative to the data root, so the histories hold
// no path of the machine that recorded them.
//
//	DATABASE_URL=... go test ./workflows -run TestRecordWalkForwardHistory -record
func TestRecordWalkForwardHistory(t *testing.T) {
	if !*record {
		t.Skip("records histories only with -record")
	}
	const id = "rec6-walkforward"
	c, _, spec := recordableStudy(t, "dqnflow_wf_rec", id)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.ControlTaskQueue},
		workflows.WalkForwardName, workflows.WalkForwardInput{WalkForwardSpec: spec, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.WalkForwardResult
	if err := r.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if n := len(res.Output.Windows); n != 2 || res.Recorded == 0 {
		t.Fatalf("study %s: %d windows, %d results recorded; want 2 windows with results", id, n, res.Recorded)
	}
	saveHistory(ctx, t, c, id, "", id+".json")
	for i := range res.Output.Windows {
		child := fmt.Sprintf("%s-window-%03d", id, i)
		saveHistory(ctx, t, c, child, "", child+".json")
	}
}

// startWorker starts a worker of every role on c with cfg and the
// options the histories are recorded with; the test stops it.
func startWorker(t *testing.T, c client.Client, cfg worker.Config) {
	t.Helper()
	cfg.Role, cfg.Workflows = worker.RoleAll, recordOptions
	w, err := worker.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
}

// recordableStudy is fixtureStudy (in PostgreSQL schema schema, under
// study id) with one seed, its series named relative to the data root so
// that a history holds no path of the machine that recorded it, on a dev
// server with a worker on the CPU backend: the server, the study's store
// and the spec.
func recordableStudy(t *testing.T, schema, id string) (client.Client, *store.Store, activities.WalkForwardSpec) {
	t.Helper()
	st, src, spec := fixtureStudy(t, schema, id)
	for i := range spec.Series {
		spec.Series[i].Path = filepath.Base(spec.Series[i].Path)
	}
	spec.Seeds = spec.Seeds[:1]
	c := workertest.DevServer(t)
	startWorker(t, c, worker.Config{Backend: cpu.Backend{}, Slots: 2, Store: st, Data: src, Checkpoints: checkpoint.Local(t.TempDir())})
	return c, st, spec
}

// childOf waits for workflow id to start a child and returns the child's
// workflow id.
func childOf(ctx context.Context, t *testing.T, c client.Client, id string) string {
	t.Helper()
	for {
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
				return a.GetWorkflowExecution().GetWorkflowId()
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s started no child", id)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
func waitForStatus(ctx context.Context, t *testing.T, c client.Client, id string, status metadata.Status) {
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
