package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/faults"
)

// faultSteps is the steps per epoch of the fault tests' runs: short
// epochs, since the faults are placed by trainer/faults, not by timing.
const faultSteps = 40

// startFaultRun starts a run of killConfig with faultSteps per epoch and
// returns its id and config.
func startFaultRun(t *testing.T, s *stack, prefix string) (string, config.RunConfig) {
	t.Helper()
	cfg := killConfig(filepath.Join(s.dir, "checkpoints"), faultSteps)
	id := prefix + "-" + randomHex(t, 4)
	s.startRun(t, id, cfg)
	return id, cfg
}

// TestNaNStopsTheRunAndKeepsTheLastGoodCheckpoint makes the worker's third
// Train call diverge (trainer/faults): the run must fail at once, without
// a retry, with a NonFinite error that names the last good checkpoint, and
// that checkpoint and every earlier one must be intact and recorded, with
// nothing recorded after them.
func TestNaNStopsTheRunAndKeepsTheLastGoodCheckpoint(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker process")
	s := newStack(t)
	w := s.startWorkerEnv("worker", []string{faults.EnvPlan + "=nan-on-train=3"})
	runID, _ := startFaultRun(t, s, "e2e-nan")
	ctx := context.Background()
	waitFor(t, "the run to end", 3*time.Minute, 200*time.Millisecond, func() (bool, error) {
		if err := w.alive(); err != nil {
			return false, err
		}
		_, err := s.pending(ctx, runID)
		return errors.Is(err, errWorkflowClosed), nil
	})
	err := s.client.GetWorkflow(ctx, runID, "").Get(ctx, nil)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrTypeNonFinite {
		t.Fatalf("run %s ended with %v, want a %s failure", runID, err, activities.ErrTypeNonFinite)
	}
	st := s.openStore(t)
	run, err := st.GetRun(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.ListCheckpoints(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != metadata.StatusFailed || len(rows) != 2 {
		t.Fatalf("run row: status %s, %d checkpoints; want failed with the checkpoints of epochs 1 and 2", run.Status, len(rows))
	}
	last := rows[len(rows)-1]
	want := fmt.Sprintf("the last good checkpoint is epoch %d", last.Epoch)
	if !strings.Contains(run.Error, want) || !strings.Contains(run.Error, last.URI) || !strings.Contains(run.Error, last.SHA256) {
		t.Fatalf("the run's recorded error %q does not say %q, naming %s and its sha256", run.Error, want, last.URI)
	}
	for _, r := range rows {
		if _, _, err := checkpoint.ReadVerified(context.Background(), r.URI, r.SHA256, checkpoint.Options{}); err != nil {
			t.Errorf("checkpoint of epoch %d: %v", r.Epoch, err)
		}
	}
}

// TestDeviceFailureMovesTheRunToAnotherWorker makes the device of the
// run's first worker fail during training (trainer/faults): that worker
// must take no more runs, and the run must move to a second worker, from
// its last checkpoint, and complete bit-identical to an uninterrupted run.
func TestDeviceFailureMovesTheRunToAnotherWorker(t *testing.T) {
	endToEnd(t, "the Temporal dev server and worker processes")
	s := newStack(t)
	a := s.startWorkerEnv("worker-a", []string{faults.EnvPlan + "=device-error-on-train=3,delay:train=1s"})
	runID, cfg := startFaultRun(t, s, "e2e-device")
	// The run is on worker A once its first epoch trains; then B joins.
	s.waitActivity("the run to train on worker A", runID, pendingActivity.trains, a)
	b := s.startWorker("worker-b")
	res := s.waitClosed(runID, 5*time.Minute, a, b)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d epochs", res.Status, res.Epochs, cfg.Epochs)
	}
	if out := a.output(); !strings.Contains(out, "refuses new runs") {
		t.Fatalf("worker A did not stop taking runs after its device failed; its log ends:\n%s", a.tail(4<<10))
	}
	if !strings.Contains(b.output(), "worker: role all serving") {
		t.Fatal("worker B did not start")
	}
	rows := checkCheckpointRows(t, s, runID, cfg)
	compareWithUninterrupted(t, s, cfg, rows)
}
