//go:build chaos

package e2e

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/dqnflow/dqnflow/metadata"
)

// TestNoFalseAlarmOnALoadedMachine trains a run while busy processes,
// four per CPU, compete with the worker and the Temporal server for every
// core, and checks in the run's history that no session and no activity
// timed out and the trainer was opened once: the 3 s session heartbeat
// timeout that makes recovery fast (docs/reliability.md) does not take a
// live, slow worker for a dead one.
func TestNoFalseAlarmOnALoadedMachine(t *testing.T) {
	endToEnd(t, "the Temporal dev server, a worker and CPU hogs")
	s := newStack(t)
	w := s.startWorker("worker")
	hogs := 4 * runtime.NumCPU()
	for i := range hogs {
		startProc(t, fmt.Sprintf("hog-%d", i), filepath.Join(s.dir, fmt.Sprintf("hog-%d.log", i)), nil, "/bin/sh", "-c", "while :; do :; done")
	}
	cfg := killConfig(filepath.Join(s.dir, "checkpoints"), 150)
	cfg.Epochs = 5
	runID := "e2e-load-" + randomHex(t, 4)
	began := time.Now()
	s.startRun(t, runID, cfg)
	res := s.waitClosed(runID, 10*time.Minute, w)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d", res.Status, res.Epochs, cfg.Epochs)
	}
	typeOf := map[int64]string{}
	opens := 0
	for _, ev := range history(t, s.client, runID) {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			typeOf[ev.GetEventId()] = name
			if name == "OpenTrainer" {
				opens++
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := ev.GetActivityTaskTimedOutEventAttributes()
			t.Errorf("false alarm under load: %s timed out (%v) %.1f s into the run",
				typeOf[a.GetScheduledEventId()], a.GetFailure().GetTimeoutFailureInfo().GetTimeoutType(),
				ev.GetEventTime().AsTime().Sub(began).Seconds())
		}
	}
	if opens != 1 {
		t.Errorf("the trainer was opened %d times, want once: the run recovered from a worker it took for lost", opens)
	}
	t.Logf("%d epochs of %d steps with %d CPU hogs on %d CPUs: %.1f s, no timeout", cfg.Epochs, cfg.StepsPerEpoch, hogs, runtime.NumCPU(), time.Since(began).Seconds())
}
