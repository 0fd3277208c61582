package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/metadata"
)

// TestStoppedWorkerHandsItsChunkOver stops (SIGTERM, as a deploy or a
// node drain does) the worker that trains a run in the middle of a
// RunEpochs chunk that has checkpointed epochs the workflow has not
// committed, with a second worker already serving. The stopping worker
// must end the chunk before its sessions end (activities.Trainer.Drain):
// the chunk fails with WorkerStopping once its checkpoints are recorded
// (or returns its epochs, when the stop fell between two), the run reopens on the second worker from the newest of them, and
// every checkpoint is bit-identical to an uninterrupted run.
func TestStoppedWorkerHandsItsChunkOver(t *testing.T) {
	endToEnd(t, "the Temporal dev server and worker processes")
	s := newStack(t)
	cfg, runID, a := startChunkRun(t, s, "e2e-chunk-stop-")
	committed, hb := waitForChunk(t, s, runID, a, "a chunk with a checkpoint past the committed epoch",
		func(hb *activities.Heartbeat, committed int) bool {
			return hb.Checkpoint != nil && hb.Checkpoint.Epoch > committed && hb.Done < cfg.Epochs-4
		})
	checkpointed := hb.Checkpoint.Epoch
	b := s.startWorker("worker-b")
	stopped := time.Now()
	a.stop(30 * time.Second)
	if err := a.alive(); err == nil {
		t.Fatal("worker A still runs after SIGTERM")
	}
	t.Logf("SIGTERM to worker A with epoch %d committed and the chunk's checkpoint of epoch %d recorded; it exited in %.2f s",
		committed, checkpointed, time.Since(stopped).Seconds())
	if out := a.output(); !strings.Contains(out, "Stopping: ended the running chunks after their checkpoints were recorded") {
		t.Errorf("worker A's log does not say that it ended its chunk before stopping; its end:\n%s", tail(out, 2000))
	}

	res := s.waitClosed(runID, 5*time.Minute, b)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d epochs", res.Status, res.Epochs, cfg.Epochs)
	}
	if resumed := reopenedAt(t, s, runID); resumed < checkpointed {
		t.Fatalf("the run reopened from the checkpoint of epoch %d, before the epoch %d checkpoint the stopped chunk had recorded", resumed, checkpointed)
	}
	// The chunk that Drain cancelled fails with WorkerStopping, or, when
	// the cancellation fell between two of its epochs, returns them; no
	// chunk that started ends cancelled or timed out. (A chunk scheduled
	// after one that returned, on the session that the stop then ended,
	// may be cancelled before it starts.)
	typeOf := map[int64]string{} // scheduled event id → activity type
	started := map[int64]bool{}  // scheduled event ids of the activities that started
	opens := 0
	for _, ev := range history(t, s.client, runID) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			typeOf[ev.GetEventId()] = a.GetActivityType().GetName()
			if a.GetActivityType().GetName() == "OpenTrainer" {
				if opens++; opens == 2 {
					d := ev.GetEventTime().AsTime().Sub(stopped)
					t.Logf("the trainer was reopened %.2f s after SIGTERM", d.Seconds())
					if d > stopRecoveryLimit {
						t.Errorf("the trainer was reopened %.2f s after SIGTERM, more than %s", d.Seconds(), stopRecoveryLimit)
					}
				}
			}
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			started[a.GetScheduledEventId()] = true
		}
		if f := ev.GetActivityTaskFailedEventAttributes(); f != nil && typeOf[f.GetScheduledEventId()] == "RunEpochs" {
			if typ := f.GetFailure().GetApplicationFailureInfo().GetType(); typ != activities.ErrTypeWorkerStopping {
				t.Errorf("a chunk failed with %q: %s; want %s", typ, f.GetFailure().GetMessage(), activities.ErrTypeWorkerStopping)
			} else {
				t.Logf("the stopped chunk failed with %s", typ)
			}
		}
		if c := ev.GetActivityTaskCanceledEventAttributes(); c != nil && typeOf[c.GetScheduledEventId()] == "RunEpochs" {
			if started[c.GetScheduledEventId()] {
				t.Error("a chunk that had started ended cancelled")
			} else {
				t.Log("a chunk scheduled on the stopped worker's session was cancelled before it started")
			}
		}
		if c := ev.GetActivityTaskTimedOutEventAttributes(); c != nil && typeOf[c.GetScheduledEventId()] == "RunEpochs" {
			t.Error("a chunk timed out")
		}
	}
	rows := checkCheckpointRows(t, s, runID, cfg)
	n := compareWithUninterrupted(t, s, cfg, rows)
	t.Logf("%d checkpoints bit-identical to the uninterrupted run (%d tensors)", len(rows), n)
}

// stopRecoveryLimit bounds the time from SIGTERM to the run's trainer
// reopened on the other worker: 0.12–0.19 s in six runs on 2 shared
// cores. A workflow task that the stopping process took and dropped would
// add its 10 s timeout (before worker.Worker.Stop stopped the control
// worker first, 2 of 6 runs did).
const stopRecoveryLimit = 5 * time.Second

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
