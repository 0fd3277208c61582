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
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
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
	cfg, runID, a := startChunkRun(t, s, "e2e-chunk-kill-")
	committed, hb := waitForChunk(t, s, runID, a, "a chunk two epochs past the committed epoch",
		func(hb *activities.Heartbeat, committed int) bool {
			return hb.Checkpoint != nil && hb.Done >= committed+2 && hb.Checkpoint.Epoch > committed && hb.Done < cfg.Epochs
		})
	done := hb.Done
	if err := a.kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL to worker A with epoch %d committed and the chunk past epoch %d", committed, done)

	b := s.startWorker("worker-b")
	res := s.waitClosed(runID, 5*time.Minute, b)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
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

// startChunkRun starts worker A and, on it, a run of 160 short epochs
// (about a sixth of a second each on a quiet machine) whose RunEpochs
// chunks each hold several epochs, and returns the run's configuration
// and ID.
func startChunkRun(t *testing.T, s *stack, idPrefix string) (config.RunConfig, string, *proc) {
	t.Helper()
	// Epochs of epochTarget/25 and 160 of them (about 30 s quiet): the
	// tests need a chunk whose heartbeat carries a checkpoint past the
	// committed epoch, and a heartbeat carries the checkpoint of the epoch
	// before it (checkpoints are written asynchronously), so a chunk must
	// hold three epochs or more within the chunk budget (2 s). With epochs
	// of epochTarget/6, a loaded clean-clone CI machine (epochs 6.5 times
	// slower than calibrated) gave every chunk one epoch and the run
	// completed while the stop test waited; at epochTarget/25 chunks still
	// hold three epochs at ten times slower.
	cfg := killConfig(filepath.Join(s.dir, "checkpoints"), max(calibrateSteps(t)/25, 8))
	cfg.Epochs = 160
	cfg.Checkpoint.KeepLast = cfg.Epochs
	a := s.startWorker("worker-a")
	runID := idPrefix + randomHex(t, 4)
	if _, err := s.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: runID, TaskQueue: workflows.ControlTaskQueue,
	}, workflows.TrainingRunName, cfg); err != nil {
		t.Fatalf("start run: %v", err)
	}
	return cfg, runID, a
}

// waitForChunk waits, for 3 minutes at most, until the heartbeat of a
// running RunEpochs chunk of the run satisfies ok, given the epoch the
// workflow has committed; it returns that epoch and the heartbeat.
func waitForChunk(t *testing.T, s *stack, runID string, w *proc, what string, ok func(hb *activities.Heartbeat, committed int) bool) (int, activities.Heartbeat) {
	t.Helper()
	ctx := context.Background()
	var committed int
	var found activities.Heartbeat
	waitFor(t, what, 3*time.Minute, 50*time.Millisecond, func() (bool, error) {
		if err := w.alive(); err != nil {
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
			if hb := pa.Heartbeat; pa.Type == "RunEpochs" && pa.Started && hb != nil && ok(hb, p.Epoch) {
				committed, found = p.Epoch, *hb
				return true, nil
			}
		}
		return false, nil
	})
	return committed, found
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
