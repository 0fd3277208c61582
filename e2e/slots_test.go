package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// TestWorkerTrainsNoMoreRunsThanSlots starts two runs at once on one
// worker: with --runs-per-device 1 the second run's first activity on the
// trainer starts only after the first run has released its slot; with 2
// the two runs train at the same time (so the check can see an overlap).
func TestWorkerTrainsNoMoreRunsThanSlots(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker process")
	for _, slots := range []int{1, 2} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			s := newStack(t)
			w := s.startWorker("worker", "--runs-per-device", strconv.Itoa(slots))
			cfg := trainertest.SmallConfig()
			cfg.Epochs, cfg.StepsPerEpoch = 3, 60
			cfg.Checkpoint.Dir = filepath.Join(s.dir, "checkpoints")
			ids := []string{"slots-a-" + randomHex(t, 3), "slots-b-" + randomHex(t, 3)}
			for _, id := range ids {
				s.startRun(t, id, cfg)
			}
			type window struct{ first, last time.Time } // first Collect started, last trainer activity completed
			spans := make([]window, len(ids))
			for i, id := range ids {
				s.waitClosed(id, 2*time.Minute, w)
				spans[i] = trainerWindow(t, s.client, id)
			}
			overlap := spans[0].first.Before(spans[1].last) && spans[1].first.Before(spans[0].last)
			if slots == 1 && overlap {
				t.Errorf("with one slot the runs trained at the same time: %v and %v", spans[0], spans[1])
			}
			if slots == 2 && !overlap {
				t.Errorf("with two slots the runs did not overlap: %v and %v", spans[0], spans[1])
			}
		})
	}
}

// trainerWindow returns when run id's first RunEpochs chunk started and
// its last one completed.
func trainerWindow(t *testing.T, c client.Client, id string) (w struct{ first, last time.Time }) {
	t.Helper()
	trainer := map[string]bool{"RunEpochs": true}
	names := map[int64]string{}
	for _, ev := range history(t, c, id) {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			names[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if n := names[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; n == "RunEpochs" && w.first.IsZero() {
				w.first = ev.GetEventTime().AsTime()
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if trainer[names[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]] {
				w.last = ev.GetEventTime().AsTime()
			}
		}
	}
	if w.first.IsZero() || w.last.IsZero() {
		t.Fatalf("run %s has no trainer activities in its history", id)
	}
	return w
}
