//go:build chaos

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/faults"
)

// TestRunSurvivesWorkerKillInEveryStage kills (SIGKILL) the only worker
// while it collects, while it takes a checkpoint's state (Snapshot, before
// any file is written; TestKillInsideACheckpointWriteKeepsThePreviousOne
// kills inside the write) and while it backtests (each stage made to last
// 3 s on that worker by trainer/faults, so that the kill lands inside it),
// starts a clean worker, and checks that the run completes with one intact
// checkpoint per epoch, bit-identical to an uninterrupted run, and
// measures the recovery.
func TestRunSurvivesWorkerKillInEveryStage(t *testing.T) {
	endToEnd(t, "the Temporal dev server and worker processes")
	for _, tc := range []struct{ name, stage, activity, in string }{
		{"Collect", "collect", "Collect", "collect"},
		{"Snapshot", "snapshot", "Checkpoint", "checkpoint"},
		{"Backtest", "backtest", "Backtest", "backtest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t)
			a := s.startWorkerEnv("worker-a", []string{faults.EnvPlan + "=delay:" + tc.stage + "=3s"})
			runID, cfg := startFaultRun(t, s, "e2e-kill-"+tc.stage)
			victim := s.waitActivity(tc.activity+" of epoch 2 to run", runID, func(pa pendingActivity) bool {
				return pa.in(tc.in) && pa.Heartbeat != nil && pa.Heartbeat.Epoch >= 2
			}, a)
			killedAt := time.Now()
			if err := a.kill(); err != nil {
				t.Fatal(err)
			}
			// B trains each epoch for at least 1.5 s, so that its first
			// heartbeat (1 s into an activity) shows training again.
			b := s.startWorkerEnv("worker-b", []string{faults.EnvPlan + "=delay:train=1500ms"})
			rec := measureRecovery(t, s, runID, victim, killedAt)
			res := s.waitClosed(runID, 5*time.Minute, b)
			if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
				t.Fatalf("run result: %s, %d epochs; want completed, %d epochs", res.Status, res.Epochs, cfg.Epochs)
			}
			rows := checkCheckpointRows(t, s, runID, cfg)
			n := compareWithUninterrupted(t, s, cfg, rows)
			t.Logf("SIGKILL during %s of epoch %d: training again %.2f s later; %d checkpoints bit-identical to the uninterrupted run (%d tensors)",
				tc.activity, victim.Heartbeat.Epoch, rec.RecoveryS, len(rows), n)
		})
	}
}

// TestDamagedCheckpointIsSkippedOnRecovery damages the run's last
// checkpoint file and then kills its worker: the worker that takes over
// must refuse the damaged file, restore the checkpoint before it, redo the
// epochs after that, and complete with every checkpoint intact and
// bit-identical to an uninterrupted run.
func TestDamagedCheckpointIsSkippedOnRecovery(t *testing.T) {
	s := newStack(t)
	a := s.startWorkerEnv("worker-a", []string{faults.EnvPlan + "=delay:train=1s"})
	runID, cfg := startFaultRun(t, s, "e2e-damaged")
	var last string
	s.waitActivity("epoch 3 to train", runID, func(pa pendingActivity) bool {
		return pa.in("train") && pa.Heartbeat != nil && pa.Heartbeat.Epoch == 3
	}, a)
	matches, _ := filepath.Glob(filepath.Join(s.dir, "checkpoints", runID, "*", "epoch-000002.safetensors"))
	if len(matches) != 1 {
		t.Fatalf("checkpoint of epoch 2: %v", matches)
	}
	last = matches[0]
	raw, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x01
	if err := os.WriteFile(last, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.kill(); err != nil {
		t.Fatal(err)
	}
	b := s.startWorker("worker-b")
	res := s.waitClosed(runID, 5*time.Minute, b)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d", res.Status, res.Epochs, cfg.Epochs)
	}
	if !strings.Contains(b.output(), "last checkpoint is damaged") {
		t.Errorf("worker B did not report the damaged checkpoint; its log ends:\n%s", b.tail(4<<10))
	}
	compareWithUninterrupted(t, s, cfg, checkCheckpointRows(t, s, runID, cfg))
}
