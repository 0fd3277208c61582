package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestEachRunTrainsOnTheDeviceOfItsSlot starts more runs than slots at
// once on one worker whose CPU backend stands in for two devices
// (--device cpu --cpu-devices 2). With one run per device, two runs train
// at the same time, on different devices, and the third waits for a free
// slot; with --runs-per-device 2, four train at once and the fifth waits.
// No device ever trains more runs than --runs-per-device, and each run's
// progress, its row in PostgreSQL and its checkpoints name the device it
// trained on.
func TestEachRunTrainsOnTheDeviceOfItsSlot(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker process")
	for _, c := range []struct{ perDevice, runs int }{{1, 3}, {2, 5}} {
		slots := 2 * c.perDevice
		t.Run(fmt.Sprintf("runs-per-device=%d", c.perDevice), func(t *testing.T) {
			s := newStack(t)
			w := s.startWorker("worker", "--cpu-devices", "2", "--runs-per-device", strconv.Itoa(c.perDevice))
			log := w.output()
			for _, want := range []string{
				"worker: cpu:0: CPU stand-in device 1 of 2", "worker: cpu:1: CPU stand-in device 2 of 2",
				fmt.Sprintf("2 device(s) × %d run(s) each = %d slot(s)", c.perDevice, slots),
			} {
				if !strings.Contains(log, want) {
					t.Fatalf("the worker's log does not say %q:\n%s", want, log)
				}
			}
			cfg := trainertest.SmallConfig()
			cfg.Epochs, cfg.StepsPerEpoch = 3, 60
			cfg.Checkpoint.Dir = filepath.Join(s.dir, "checkpoints")
			ids := make([]string, c.runs)
			for i := range ids {
				ids[i] = fmt.Sprintf("dev-%d-%s", i, randomHex(t, 3))
				s.startRun(t, ids[i], cfg)
			}
			st := s.openStore(t)
			spans := make([]deviceSpan, len(ids))
			for i, id := range ids {
				res := s.waitClosed(id, 3*time.Minute, w)
				win := trainerWindow(t, s.client, id)
				spans[i] = deviceSpan{id: id, first: win.first, last: win.last, device: runDevice(t, s, st, id, res)}
			}
			if got := maxConcurrent(spans, ""); got != slots {
				t.Errorf("at most %d runs trained at once, want exactly %d (the slots): %v", got, slots, spans)
			}
			for _, d := range []string{"cpu:0", "cpu:1"} {
				if got := maxConcurrent(spans, d); got > c.perDevice || got == 0 {
					t.Errorf("device %s trained up to %d runs at once, want 1 to %d: %v", d, got, c.perDevice, spans)
				}
			}
		})
	}
}

// deviceSpan is when a run trained (trainerWindow) and on which device.
type deviceSpan struct {
	id          string
	first, last time.Time
	device      string // "cpu:0", "cpu:1"
}

func (d deviceSpan) String() string {
	return fmt.Sprintf("%s on %s %s–%s", d.id, d.device, d.first.Format("15:04:05.000"), d.last.Format("15:04:05.000"))
}

// maxConcurrent is the most spans on device (any device when empty) that
// overlap at one instant.
func maxConcurrent(spans []deviceSpan, device string) int {
	best := 0
	for _, a := range spans {
		if device != "" && a.device != device {
			continue
		}
		n := 0 // spans running at a.first, when a starts
		for _, b := range spans {
			if (device == "" || b.device == device) && !b.first.After(a.first) && b.last.After(a.first) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// runDevice checks that the run's progress, its row and its last
// checkpoint name the same stand-in device, and returns the device's name.
func runDevice(t *testing.T, s *stack, st *store.Store, id string, res workflows.RunResult) string {
	t.Helper()
	p := runProgress(t, s, st, id, res)
	if p.Recoveries != 0 {
		t.Fatalf("run %s recovered %d times; this test needs runs that stay on one device", id, p.Recoveries)
	}
	name, _, ok := strings.Cut(p.Device, " ")
	if !ok || !slices.Contains([]string{"cpu:0", "cpu:1"}, name) || !strings.Contains(p.Device, "stand-in device") {
		t.Fatalf("progress of %s names device %q, want one of the stand-ins cpu:0, cpu:1", id, p.Device)
	}
	if res.LastCheckpoint == nil {
		t.Fatalf("run %s has no checkpoint", id)
	}
	ck, _, err := checkpoint.Read(context.Background(), res.LastCheckpoint.URI, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ck.Meta[checkpoint.MetaDevice]; got != p.Device {
		t.Errorf("run %s: checkpoint %s says device %q, progress %q", id, res.LastCheckpoint.URI, got, p.Device)
	}
	return name
}
