//go:build chaos

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// loadRuns and loadSlots: 16 runs at once on workers of 4 slots each.
const (
	loadRuns  = 16
	loadSlots = 4
)

// TestSixteenConcurrentRuns starts 16 small runs at once on one worker and
// on two (4 slots each), and checks that every run completes with one
// checkpoint per epoch bit-identical to the same run trained alone, that
// no worker ever held more sessions than its slots, and that each worker's
// peak memory stays under 1 GiB; it reports the peak.
func TestSixteenConcurrentRuns(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			s := newStack(t)
			var procs []*proc
			for i := range workers {
				procs = append(procs, s.startWorker(fmt.Sprintf("worker-%d", i), "--slots", strconv.Itoa(loadSlots)))
			}
			began := time.Now()
			ids := make([]string, loadRuns)
			cfgs := make([]config.RunConfig, loadRuns)
			for i := range ids {
				cfg := trainertest.SmallConfig()
				cfg.Seed = uint64(i + 1)
				cfg.Epochs, cfg.StepsPerEpoch = 3, 20
				cfg.Checkpoint = config.CheckpointConfig{Every: 1, KeepLast: 10, KeepBest: 1, Dir: filepath.Join(s.dir, "checkpoints")}
				cfg.Backtest = config.BacktestConfig{Every: 1}
				ids[i], cfgs[i] = fmt.Sprintf("e2e-load-%02d-%s", i, randomHex(t, 3)), cfg
				s.startRun(t, ids[i], cfg)
			}
			for i, id := range ids {
				res := s.waitClosed(id, 10*time.Minute, procs...)
				if res.Status != metadata.StatusCompleted || res.Epochs != cfgs[i].Epochs {
					t.Fatalf("run %s: %s, %d epochs; want completed, %d", id, res.Status, res.Epochs, cfgs[i].Epochs)
				}
			}
			elapsed := time.Since(began)
			for i, id := range ids {
				compareWithUninterrupted(t, s, cfgs[i], checkCheckpointRows(t, s, id, cfgs[i]))
			}
			peak := sessionsPerWorker(t, s, ids)
			for w, n := range peak {
				if n > loadSlots {
					t.Errorf("worker %s held %d sessions at once, more than its %d slots", w, n, loadSlots)
				}
			}
			var mem []string
			for _, p := range procs {
				hwm := peakRSS(t, p)
				mem = append(mem, fmt.Sprintf("%s %.0f MiB", p.name, float64(hwm)/(1<<20)))
				if hwm > 1<<30 {
					t.Errorf("%s peaked at %.0f MiB, over 1 GiB", p.name, float64(hwm)/(1<<20))
				}
			}
			t.Logf("%d runs on %d worker(s) of %d slots: %.1f s; most sessions at once per worker %v; peak RSS %s; all bit-identical to training alone",
				loadRuns, workers, loadSlots, elapsed.Seconds(), peak, strings.Join(mem, ", "))
		})
	}
}

// sessionsPerWorker returns, for each worker identity, the most sessions
// of runs ids it held at the same time, from the session creation
// activities in the runs' histories (started on the worker, ended when the
// session completed or failed).
func sessionsPerWorker(t *testing.T, s *stack, ids []string) map[string]int {
	t.Helper()
	type edge struct {
		at    time.Time
		delta int
	}
	edges := map[string][]edge{}
	for _, id := range ids {
		names, started := map[int64]string{}, map[int64]string{}
		for _, ev := range history(t, s.client, id) {
			at := ev.GetEventTime().AsTime()
			var sched int64
			switch ev.GetEventType() {
			case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				names[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
				continue
			case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				a := ev.GetActivityTaskStartedEventAttributes()
				if names[a.GetScheduledEventId()] == "internalSessionCreationActivity" {
					started[a.GetScheduledEventId()] = a.GetIdentity()
					edges[a.GetIdentity()] = append(edges[a.GetIdentity()], edge{at, +1})
				}
				continue
			case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				sched = ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			case enums.EVENT_TYPE_ACTIVITY_TASK_FAILED:
				sched = ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
			case enums.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
				sched = ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()
			case enums.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
				sched = ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()
			default:
				continue
			}
			if w, ok := started[sched]; ok {
				edges[w] = append(edges[w], edge{at, -1})
			}
		}
	}
	peak := map[string]int{}
	for w, es := range edges {
		// Ends before starts at the same instant: a slot freed and taken.
		sort.Slice(es, func(i, j int) bool {
			return es[i].at.Before(es[j].at) || es[i].at.Equal(es[j].at) && es[i].delta < es[j].delta
		})
		n := 0
		for _, e := range es {
			n += e.delta
			peak[w] = max(peak[w], n)
		}
	}
	return peak
}

// peakRSS is the process's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T, p *proc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("peak memory of %s: %v", p.name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
	return 0
}
