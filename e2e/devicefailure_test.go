package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer/faults"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestDeviceFailureMovesTheRunToAnotherSlot runs two runs on one worker
// whose CPU backend stands in for three devices, one run each
// (--cpu-devices 3): they take cpu:0 and cpu:1. The device cpu:1 fails on
// its third Train call (trainer/faults, device-error-on-train=3@cpu:1).
// The run on it moves to a free slot of a working device (cpu:2, or cpu:0
// once the other run is done) and resumes from its last checkpoint; the
// run on cpu:0 goes on untouched (its trainer opened once). Both complete
// bit-identical to an uninterrupted run; the moved run's checkpoints name
// cpu:1 before the failure and its new device after it, and its row and
// progress name the new device. The worker keeps serving: only cpu:1 is out.
func TestDeviceFailureMovesTheRunToAnotherSlot(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker process")
	s := newStack(t)
	w := s.startWorkerEnv("worker", []string{faults.EnvPlan + "=device-error-on-train=3@cpu:1"},
		"--cpu-devices", "3", "--runs-per-device", "1")
	cfg := trainertest.SmallConfig()
	cfg.Epochs, cfg.StepsPerEpoch = 4, 60
	cfg.Checkpoint.Dir = filepath.Join(s.dir, "checkpoints")
	cfg.Checkpoint.KeepLast = 10
	ids := []string{"slot-a-" + randomHex(t, 3), "slot-b-" + randomHex(t, 3)}
	for _, id := range ids {
		s.startRun(t, id, cfg)
	}
	st := s.openStore(t)

	moved, untouched := "", ""
	for _, id := range ids {
		res := s.waitClosed(id, 4*time.Minute, w)
		if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
			t.Fatalf("run %s: %s after %d epochs, want completed after %d", id, res.Status, res.Epochs, cfg.Epochs)
		}
		rows := checkCheckpointRows(t, s, res.RunID, cfg)
		compareWithUninterrupted(t, s, cfg, rows)
		devices := checkpointDevices(t, s, rows)
		opens := len(trainerOpens(t, s.client, id))
		name := runDeviceName(t, s, st, id, res)
		t.Logf("run %s: checkpoints of epochs 1..%d on %v, trainer opened %d time(s), row and progress name %s", id, cfg.Epochs, devices, opens, name)
		// The moved run takes whichever working slot is free when it
		// reopens: cpu:2, or cpu:0 if the other run has finished by then
		// (a chunk of epochs can finish it within the same second).
		after := ""
		if len(devices) == 4 {
			after = devices[2]
		}
		switch {
		case slices.Equal(devices, []string{"cpu:1", "cpu:1", after, after}) && (after == "cpu:0" || after == "cpu:2"):
			moved = id
			if name != after || opens != 2 {
				t.Errorf("moved run %s: row and progress name %s, trainer opened %d times; want %s, twice", id, name, opens, after)
			}
		case slices.Equal(devices, []string{"cpu:0", "cpu:0", "cpu:0", "cpu:0"}):
			untouched = id
			if name != "cpu:0" || opens != 1 {
				t.Errorf("untouched run %s: row and progress name %s, trainer opened %d times; want cpu:0, once", id, name, opens)
			}
		default:
			t.Errorf("run %s: checkpoints of epochs 1..4 name devices %v; want cpu:1 twice then a working device twice (the failed device's run), or cpu:0 throughout", id, devices)
		}
	}
	if moved == "" || untouched == "" {
		t.Fatalf("want one run moved off cpu:1 and one untouched on cpu:0; got moved %q, untouched %q", moved, untouched)
	}
	log := w.output()
	if !strings.Contains(log, "its slots take no more runs") || strings.Contains(log, "refuses new runs") {
		t.Errorf("the worker's log should take cpu:1 out of service and keep serving; it ends:\n%s", w.tail(4<<10))
	}
}

// checkpointDevices returns the device each checkpoint's metadata names
// (the name before the description), in the order of rows, and fails the
// test if one is marked not bit-exact.
func checkpointDevices(t *testing.T, s *stack, rows []metadata.CheckpointRecord) []string {
	t.Helper()
	var out []string
	for _, r := range rows {
		b, err := s.readBlob(r.URI)
		if err != nil {
			t.Fatal(err)
		}
		ck, _, err := checkpoint.Decode(b)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", r.URI, err)
		}
		name, _, _ := strings.Cut(ck.Meta[checkpoint.MetaDevice], " ")
		out = append(out, name)
		if why := ck.Meta[checkpoint.MetaNotBitExact]; why != "" {
			t.Errorf("checkpoint of epoch %d is marked not bit-exact (%s): a move between stand-ins of one CPU is exact", r.Epoch, why)
		}
	}
	return out
}

// trainerOpens returns the results of the OpenTrainer activities that
// completed in run id's history, in order: one, neither reused nor
// restored, for a run that never lost its trainer.
func trainerOpens(t *testing.T, c client.Client, id string) []activities.OpenOutput {
	t.Helper()
	names := map[int64]string{}
	var out []activities.OpenOutput
	for _, ev := range history(t, c, id) {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			names[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			if names[a.GetScheduledEventId()] != "OpenTrainer" {
				continue
			}
			var o activities.OpenOutput
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &o); err != nil {
				t.Fatalf("run %s: OpenTrainer result: %v", id, err)
			}
			out = append(out, o)
		}
	}
	return out
}

// describeOpens says, for failure messages, how each open got its trainer.
func describeOpens(opens []activities.OpenOutput) string {
	var out []string
	for _, o := range opens {
		how := "new"
		switch {
		case o.Reused:
			how = "reused"
		case o.Fallback != nil:
			how = fmt.Sprintf("restored epoch %d instead of a damaged one", o.Epoch)
		case o.Restored:
			how = fmt.Sprintf("restored epoch %d", o.Epoch)
		}
		out = append(out, how+" on "+o.Host)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// runDeviceName checks that the run's progress and its row name the same
// device and returns its name ("cpu:2").
func runDeviceName(t *testing.T, s *stack, st *store.Store, id string, res workflows.RunResult) string {
	t.Helper()
	p := runProgress(t, s, st, id, res)
	name, _, _ := strings.Cut(p.Device, " ")
	if name == "" {
		t.Fatalf("progress of %s names no device", id)
	}
	return name
}

// runProgress returns the progress of run id, after checking that its row
// names the device the progress names.
func runProgress(t *testing.T, s *stack, st *store.Store, id string, res workflows.RunResult) workflows.Progress {
	t.Helper()
	ctx := context.Background()
	v, err := s.client.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	if err != nil {
		t.Fatalf("progress of %s: %v", id, err)
	}
	var p workflows.Progress
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	row, err := st.GetRun(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Device != p.Device {
		t.Errorf("run %s: row says device %q, progress %q", id, row.Device, p.Device)
	}
	return p
}
