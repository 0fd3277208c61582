package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/workflows"
)

// envPerfOut names a directory where the test writes recovery.json, the
// measured recovery time, for docs/perf.
const envPerfOut = "DQNFLOW_PERF_OUT"

// killEpoch is the epoch whose training the test interrupts: two
// checkpoints exist before it, so the new worker restores a real checkpoint
// rather than starting afresh, and epochs remain after it.
const killEpoch = 3

// epochTarget is how long one TrainEpoch should last. The kill waits for
// the epoch's first heartbeat, which the activity sends one second after it
// starts (activities.Trainer.HeartbeatInterval), so 2.5 s leaves the kill
// more than a second to land before the epoch ends.
const epochTarget = 2500 * time.Millisecond

// recoveryBound is how long the test waits for training to resume.
const recoveryBound = 90 * time.Second

// recoveryLimit is the longest recovery the test accepts: the target is
// 6 s from the kill to training again (3 s session heartbeat timeout, 1 s
// sticky schedule-to-start, a restore and the first heartbeat, 1 s into
// the epoch; docs/reliability.md); the margin is for a loaded CI machine.
// Measured 4.3–5.1 s on 2 shared cores.
const recoveryLimit = 9 * time.Second

// killConfig is the kill test's run: six epochs on the synthetic series,
// checkpointed and backtested after each, none pruned.
func killConfig(ckDir string, stepsPerEpoch int) config.RunConfig {
	cfg := config.Defaults()
	cfg.Data.Path, cfg.Data.SyntheticBars = prices.SyntheticPath, 3000
	cfg.Epochs = 6
	cfg.StepsPerEpoch = stepsPerEpoch
	cfg.BatchSize = 128
	cfg.Model = config.ModelConfig{Trunk1: 128, Trunk2: 128, Head: 64, Atoms: 21, VMin: -5, VMax: 5}
	cfg.Env.NumEnvs, cfg.Env.EpisodeBars, cfg.Env.CollectSteps = 8, 128, 32
	cfg.Env.EpsilonDecaySteps = 5000
	cfg.Replay.Capacity, cfg.Replay.Warmup, cfg.Replay.BetaSteps = 4096, 256, 1000
	cfg.Checkpoint = config.CheckpointConfig{Every: 1, KeepLast: 10, KeepBest: 1, Dir: ckDir}
	cfg.Backtest = config.BacktestConfig{Every: 1}
	return cfg
}

// calibrateSteps returns the steps per epoch that make one epoch of
// killConfig last about epochTarget on this machine, timed with the CPU
// backend in this process.
func calibrateSteps(t *testing.T) int {
	t.Helper()
	cfg := killConfig(t.TempDir(), 1)
	ctx := context.Background()
	tr := newCPUTrainer(t, cfg)
	defer tr.Close()
	if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(ctx, 5, nil); err != nil { // fills the replay warm-up
		t.Fatal(err)
	}
	// The fastest of three timings: load on the machine (other test
	// packages run beside this one) only slows steps down, and an epoch
	// must last epochTarget even when the run itself finds the machine
	// quiet; a loaded run only makes epochs longer.
	const n, reps = 10, 3
	perStep := time.Duration(math.MaxInt64)
	for range reps {
		start := time.Now()
		if _, err := tr.Train(ctx, n, nil); err != nil {
			t.Fatal(err)
		}
		perStep = min(perStep, time.Since(start)/n)
	}
	return min(max(int(epochTarget/perStep), 100), 20000)
}

// newCPUTrainer prepares cfg's data and opens a CPU trainer on it in this
// process; the caller closes it.
func newCPUTrainer(t *testing.T, cfg config.RunConfig) trainer.Trainer {
	t.Helper()
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cpu.Backend{}.New(context.Background(), cfg, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestRunSurvivesWorkerKill kills (SIGKILL) the only worker in the middle
// of a TrainEpoch, starts another, and checks that the run completes with
// one intact checkpoint per epoch whose weights, optimiser, replay and
// random state are bit-identical to an uninterrupted run of the same
// config. It measures the recovery time: from the kill until training runs
// again on the new worker.
func TestRunSurvivesWorkerKill(t *testing.T) {
	endToEnd(t, "the Temporal dev server and worker processes")
	began := time.Now()
	s := newStack(t)
	cfg := killConfig(filepath.Join(s.dir, "checkpoints"), calibrateSteps(t))
	t.Logf("config: %d epochs of %d steps (calibrated for %s per epoch), batch %d", cfg.Epochs, cfg.StepsPerEpoch, epochTarget, cfg.BatchSize)
	a := s.startWorker("worker-a")

	runID := "e2e-kill-" + randomHex(t, 4)
	s.startRun(t, runID, cfg)

	// The kill lands while TrainEpoch of killEpoch runs and has reported
	// a step: its trainer is half-way through the epoch.
	victim := s.waitInTraining(runID, killEpoch, a)
	killedAt := time.Now()
	if err := a.kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL to worker A during TrainEpoch of epoch %d, at step %d/%d (global step %d), %.1f s into the test",
		victim.Heartbeat.Epoch, victim.Heartbeat.Step, victim.Heartbeat.Steps, victim.Heartbeat.GlobalStep, killedAt.Sub(began).Seconds())

	b := s.startWorker("worker-b")
	rec := measureRecovery(t, s, runID, victim, killedAt)

	res := s.waitClosed(runID, 5*time.Minute, b)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs || res.GlobalStep != int64(cfg.Epochs*cfg.StepsPerEpoch) {
		t.Fatalf("run result: status %s, %d epochs, global step %d; want completed, %d epochs, global step %d",
			res.Status, res.Epochs, res.GlobalStep, cfg.Epochs, cfg.Epochs*cfg.StepsPerEpoch)
	}

	rec.Events = recoveryEvents(t, s, runID, victim.ID, killedAt)
	t.Logf("recovery: training resumed %.2f s after the kill (new attempt seen running %.2f s after it); history, s after the kill: %v",
		rec.RecoveryS, rec.ResumedS, rec.Events)
	writeRecovery(t, rec)
	if rec.RecoveryS > recoveryLimit.Seconds() {
		t.Errorf("training resumed %.2f s after the kill, more than %s (target 6 s)", rec.RecoveryS, recoveryLimit)
	}

	rows := checkCheckpointRows(t, s, runID, cfg)
	n := compareWithUninterrupted(t, s, cfg, rows)
	t.Logf("all %d checkpoints are bit-identical to the uninterrupted run: %d tensors compared; test took %.1f s",
		len(rows), n, time.Since(began).Seconds())
}

// recovery is what recovery.json holds. Times are seconds after the kill.
type recovery struct {
	// RecoveryS is the figure: until a Collect or TrainEpoch attempt
	// started after the kill has heartbeated (training runs again).
	RecoveryS float64 `json:"recovery_s"`
	// ResumedS is until that attempt was first seen running.
	ResumedS float64 `json:"resumed_s"`
	// Events are the run's history events after the kill (server time).
	Events map[string]float64 `json:"events"`

	KilledEpoch               int     `json:"killed_epoch"`
	KilledStep                int     `json:"killed_step"`
	StepsPerEpoch             int     `json:"steps_per_epoch"`
	SessionHeartbeatTimeoutS  float64 `json:"session_heartbeat_timeout_s"`
	ActivityHeartbeatTimeoutS float64 `json:"activity_heartbeat_timeout_s"`
	CPUs                      int     `json:"cpus"`
	Measured                  string  `json:"measured"`
}

// measureRecovery polls the run every 100 ms from the kill until a Collect
// or TrainEpoch other than the killed one runs and has heartbeated after
// the kill, and fails the test after recoveryBound.
func measureRecovery(t *testing.T, s *stack, runID string, victim pendingActivity, killedAt time.Time) recovery {
	t.Helper()
	o := workflows.DefaultOptions()
	rec := recovery{
		KilledEpoch: victim.Heartbeat.Epoch, KilledStep: victim.Heartbeat.Step, StepsPerEpoch: victim.Heartbeat.Steps,
		SessionHeartbeatTimeoutS:  o.SessionHeartbeatTimeout.Seconds(),
		ActivityHeartbeatTimeoutS: o.HeartbeatTimeout.Seconds(),
		CPUs:                      runtime.NumCPU(), Measured: killedAt.UTC().Format(time.RFC3339),
	}
	var resumed time.Time
	waitFor(t, "training to resume on worker B", recoveryBound-time.Since(killedAt), 100*time.Millisecond, func() (bool, error) {
		acts, err := s.pending(context.Background(), runID)
		if err != nil {
			return false, err
		}
		now := time.Now()
		for _, pa := range acts {
			if pa.ID == victim.ID || !pa.Started || !pa.trains() {
				continue
			}
			if resumed.IsZero() {
				resumed = now
			}
			if pa.LastHeartbeat.After(killedAt) {
				rec.ResumedS = resumed.Sub(killedAt).Round(time.Millisecond).Seconds()
				rec.RecoveryS = now.Sub(killedAt).Round(time.Millisecond).Seconds()
				return true, nil
			}
		}
		return false, nil
	})
	return rec
}

// recoveryEvents checks in the run's history that the killed TrainEpoch
// never completed (the kill landed mid-epoch), and returns when the steps
// of the recovery happened, in seconds after the kill: the session of the
// dead worker timing out, a workflow task that waited for the dead worker
// (it also ran the workflow), the killed activity cancelled, the trainer
// reopened from the checkpoint, and training scheduled again.
func recoveryEvents(t *testing.T, s *stack, runID, victimID string, killedAt time.Time) map[string]float64 {
	t.Helper()
	typeOf := map[int64]string{} // scheduled event id → activity type
	var victimSched int64
	events := map[string]float64{}
	first := func(name string, at time.Time) {
		if _, ok := events[name]; !ok && at.After(killedAt) {
			events[name] = at.Sub(killedAt).Round(time.Millisecond).Seconds()
		}
	}
	for _, ev := range history(t, s.client, runID) {
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			typeOf[ev.GetEventId()] = a.GetActivityType().GetName()
			if a.GetActivityId() == victimID {
				victimSched = ev.GetEventId()
			}
			switch a.GetActivityType().GetName() {
			case "internalSessionCreationActivity":
				first("new_session_requested", at)
			case "OpenTrainer":
				first("open_trainer_scheduled", at)
			case "RunEpochs":
				first("train_epoch_scheduled", at)
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			id := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			if id == victimSched {
				t.Fatalf("the killed TrainEpoch (activity %s) completed: the kill did not land mid-epoch; "+
					"the epoch must last longer than its first heartbeat (epochTarget)", victimID)
			}
			if typeOf[id] == "OpenTrainer" {
				first("open_trainer_completed", at)
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			if typeOf[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()] == "internalSessionCreationActivity" {
				first("old_session_timed_out", at)
			}
		case enums.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			// A workflow task sent to the dead worker's sticky queue, given
			// to another worker after the sticky schedule-to-start timeout.
			first("workflow_task_timed_out", at)
		case enums.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
			if ev.GetActivityTaskCancelRequestedEventAttributes().GetScheduledEventId() == victimSched {
				first("killed_train_epoch_cancel_requested", at)
			}
		}
	}
	if victimSched == 0 {
		t.Fatalf("history of run %s has no activity %s (the killed TrainEpoch)", runID, victimID)
	}
	return events
}

// writeRecovery writes rec to $DQNFLOW_PERF_OUT/recovery.json when set.
func writeRecovery(t *testing.T, rec recovery) {
	t.Helper()
	dir := os.Getenv(envPerfOut)
	if dir == "" {
		return
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "recovery.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// checkCheckpointRows checks the run's checkpoint rows in PostgreSQL: one
// per epoch, none pruned, global steps of whole epochs, and a blob at each
// uri (a file, or an object of the stack's S3 server) with the recorded size
// and SHA-256.
func checkCheckpointRows(t *testing.T, s *stack, runID string, cfg config.RunConfig) []metadata.CheckpointRecord {
	t.Helper()
	rows := s.checkpointRows(t, runID)
	epochs := make([]int, len(rows))
	for i, r := range rows {
		epochs[i] = r.Epoch
	}
	if len(rows) != cfg.Epochs {
		t.Fatalf("checkpoint rows of run %s are for epochs %v, want one for each of 1..%d", runID, epochs, cfg.Epochs)
	}
	for i, r := range rows {
		e := i + 1
		if r.Epoch != e {
			t.Fatalf("checkpoint rows are for epochs %v, want 1..%d", epochs, cfg.Epochs)
		}
		if want := int64(e * cfg.StepsPerEpoch); r.GlobalStep != want {
			t.Errorf("checkpoint of epoch %d: global_step %d, want %d", e, r.GlobalStep, want)
		}
		if r.Pruned {
			t.Errorf("checkpoint of epoch %d is marked pruned (keep_last %d)", e, cfg.Checkpoint.KeepLast)
		}
		b, err := s.readBlob(r.URI)
		if err != nil {
			t.Errorf("checkpoint of epoch %d: %v", e, err)
			continue
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != r.SHA256 || int64(len(b)) != r.Bytes {
			t.Errorf("checkpoint of epoch %d: file %s has %d bytes, sha256 %x; the row records %d bytes, sha256 %s",
				e, r.URI, len(b), sum, r.Bytes, r.SHA256)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return rows
}

// compareWithUninterrupted trains cfg in this process with the CPU
// backend, exactly as the workflow drives a trainer that is never lost (per
// epoch Collect(env.collect_steps) → Train(steps_per_epoch) → SyncTarget;
// the checkpoints and backtests between epochs only read the trainer), and
// compares the state after each epoch with that epoch's checkpoint blob,
// tensor by tensor, bit for bit. It returns the number of tensors compared.
func compareWithUninterrupted(t *testing.T, s *stack, cfg config.RunConfig, rows []metadata.CheckpointRecord) int {
	t.Helper()
	ctx := context.Background()
	tr := newCPUTrainer(t, cfg)
	defer tr.Close()
	compared := 0
	for _, row := range rows {
		if err := uninterruptedEpoch(ctx, tr, cfg); err != nil {
			t.Fatalf("uninterrupted run, epoch %d: %v", row.Epoch, err)
		}
		want, err := tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.readBlob(row.URI)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := checkpoint.Decode(b)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", row.URI, err)
		}
		compared += equalTensors(t, row.Epoch, want, got)
	}
	return compared
}

// uninterruptedEpoch is one epoch of the workflow's stateful steps
// (activities.Trainer.Collect, TrainEpoch and SyncTarget).
func uninterruptedEpoch(ctx context.Context, tr trainer.Trainer, cfg config.RunConfig) error {
	if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
		return err
	}
	if _, err := tr.Train(ctx, cfg.StepsPerEpoch, nil); err != nil {
		return err
	}
	return tr.SyncTarget()
}

// equalTensors fails the test unless got holds exactly want's tensors
// (names, dtypes, shapes and bytes) and returns how many it compared.
func equalTensors(t *testing.T, epoch int, want, got *checkpoint.Checkpoint) int {
	t.Helper()
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("epoch %d: the checkpoint holds %d tensors, the uninterrupted run %d", epoch, len(got.Tensors), len(want.Tensors))
	}
	for _, w := range want.Tensors {
		g, ok := got.Find(w.Name)
		switch {
		case !ok:
			t.Fatalf("epoch %d: the checkpoint has no tensor %s", epoch, w.Name)
		case g.DType != w.DType || !slices.Equal(g.Shape, w.Shape):
			t.Fatalf("epoch %d: tensor %s is %s%v in the checkpoint, %s%v uninterrupted", epoch, w.Name, g.DType, g.Shape, w.DType, w.Shape)
		case !bytes.Equal(g.Data, w.Data):
			t.Fatalf("epoch %d: tensor %s differs from the uninterrupted run's (first differing byte %d of %d)",
				epoch, w.Name, firstDiff(g.Data, w.Data), len(w.Data))
		}
	}
	return len(want.Tensors)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
