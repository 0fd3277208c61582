package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestKillInAChunkKeepsItsCheckpoints kills (SIGKILL) the only worker in
// the middle of a RunEpochs chunk that has already trained and
// checkpointed two epochs or more the workflow has not committed yet
// (ADR 0010). The run must reopen on a new worker from the newest
// checkpoint the chunk wrote, not from the one it started after: a crash
// loses nothing that was checkpointed. Every checkpoint must then be
// bit-identical to an uninterrupted run.
func TestKillInAChunkKeepsItsCheckpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts the Temporal dev server and worker processes")
	}
	s := newStack(t)
	// Epochs of about 0.4 s: a 2-s chunk holds about five.
	cfg := killConfig(filepath.Join(s.dir, "checkpoints"), max(calibrateSteps(t)/6, 20))
	// 24 epochs (about 10 s): on a quiet machine a run of 12 could finish
	// before the server saw a heartbeat past the committed epoch.
	cfg.Epochs = 24
	cfg.Checkpoint.KeepLast = cfg.Epochs
	a := s.startWorker("worker-a")

	ctx := context.Background()
	runID := "e2e-chunk-kill-" + randomHex(t, 4)
	if _, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: runID, TaskQueue: workflows.ControlTaskQueue,
	}, workflows.TrainingRunName, cfg); err != nil {
		t.Fatalf("start run: %v", err)
	}

	var committed, done int
	waitFor(t, "a chunk two epochs past the committed epoch", 3*time.Minute, 50*time.Millisecond, func() (bool, error) {
		if err := a.alive(); err != nil {
			return false, err
		}
		acts, err := s.pending(ctx, runID)
		if err != nil {
			return false, err
		}
		v, err := s.client.QueryWorkflow(ctx, runID, "", workflows.ProgressQuery)
		if err != nil {
			return false, nil
		}
		var p workflows.Progress
		if err := v.Get(&p); err != nil {
			return false, err
		}
		for _, pa := range acts {
			if hb := pa.Heartbeat; pa.Type == "RunEpochs" && pa.Started && hb != nil && hb.Checkpoint != nil &&
				hb.Done >= p.Epoch+2 && hb.Checkpoint.Epoch > p.Epoch && hb.Done < cfg.Epochs {
				committed, done = p.Epoch, hb.Done
				return true, nil
			}
		}
		return false, nil
	})
	if err := a.kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL to worker A with epoch %d committed and the chunk past epoch %d", committed, done)

	b := s.startWorker("worker-b")
	res := s.waitClosed(runID, 5*time.Minute, b)
	if res.Status != store.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d epochs", res.Status, res.Epochs, cfg.Epochs)
	}
	resumed := reopenedAt(t, s, runID)
	if resumed <= committed {
		t.Fatalf("the run reopened from the checkpoint of epoch %d, not past the committed epoch %d: "+
			"the checkpoints the killed chunk wrote (it was past epoch %d) were lost", resumed, committed, done)
	}
	rows := checkCheckpointRows(t, s, runID, cfg)
	n := compareWithUninterrupted(t, s, cfg, rows)
	t.Logf("reopened from the chunk's checkpoint of epoch %d (committed: %d); %d checkpoints bit-identical to the uninterrupted run (%d tensors)",
		resumed, committed, len(rows), n)
}

// reopenedAt returns the epoch of the checkpoint that the run's second
// OpenTrainer restored (the first opens a new trainer).
func reopenedAt(t *testing.T, s *stack, runID string) int {
	t.Helper()
	var opens []activities.OpenInput
	for _, ev := range history(t, s.client, runID) {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != "OpenTrainer" {
			continue
		}
		var in activities.OpenInput
		if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in); err != nil {
			t.Fatal(err)
		}
		opens = append(opens, in)
	}
	if len(opens) < 2 || opens[1].Resume == nil {
		t.Fatalf("run %s opened its trainer %s; want a reopen from a checkpoint after the kill", runID, fmt.Sprint(opens))
	}
	return opens[1].Resume.Epoch
}
