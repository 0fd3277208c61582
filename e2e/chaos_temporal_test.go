//go:build chaos

package e2e

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/testproc"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store/storetest"
	"github.com/dqnflow/dqnflow/trainer/faults"
	"github.com/dqnflow/dqnflow/worker"
	"github.com/dqnflow/dqnflow/workflows"
)

// restartableServer is a Temporal dev server the test can kill and start
// again on the same port and SQLite file, as `dqnflow dev` keeps it.
type restartableServer struct {
	s    *stack
	args []string
	n    int
	proc *proc
}

func newRestartableStack(t *testing.T) (*stack, *restartableServer) {
	t.Helper()
	s := &stack{t: t, dir: t.TempDir(), bin: dqnflowBinary(t)}
	s.dbURL = storetest.Schema(t, "dqnflow_e2e")
	port := func() string { return strconv.Itoa(testproc.FreePort(t)) }
	// A server that exits at its first start (a port taken between
	// picking and binding it, by another test's server) is started again
	// on new ports, up to three times; a restart keeps its ports.
	srv := &restartableServer{s: s}
	testproc.StartAgain(t, "Temporal dev server", func(attempt int) (bool, error) {
		p := port()
		s.addr = net.JoinHostPort("127.0.0.1", p)
		srv.args = append([]string{"server", "start-dev", "--headless", "--ip", "127.0.0.1",
			"--port", p, "--http-port", port(), "--metrics-port", "0",
			"--db-filename", filepath.Join(s.dir, "temporal-"+strconv.Itoa(attempt)+".db"), "--log-level", "warn"}, worker.DevServerFlags()...)
		err := srv.start()
		return srv.proc.alive() != nil, err
	})
	c, err := worker.DialWhenReady(context.Background(), client.Options{HostPort: s.addr}, time.Minute, srv.proc.alive)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s.client = c
	return s, srv
}

// start starts the server (again) with its arguments and waits until it
// answers.
func (r *restartableServer) start() error {
	r.n++
	r.proc = startProc(r.s.t, "temporal-"+strconv.Itoa(r.n), filepath.Join(r.s.dir, "temporal-"+strconv.Itoa(r.n)+".log"),
		nil, temporalBinary(r.s.t), r.args...)
	c, err := worker.DialWhenReady(context.Background(), client.Options{HostPort: r.s.addr}, time.Minute, r.proc.alive)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// waitTraining waits until run id trains epoch 2 or later.
func waitTraining(t *testing.T, s *stack, id string, procs ...*proc) {
	t.Helper()
	s.waitActivity("epoch 2 to train", id, func(pa pendingActivity) bool {
		return pa.in("train") && pa.Heartbeat != nil && pa.Heartbeat.Epoch >= 2
	}, procs...)
}

// TestRunSurvivesTemporalServerKill kills (SIGKILL) the Temporal dev server
// in the middle of a run, starts it again on its SQLite file, and checks
// that nothing was lost: the run completes with the same worker, which
// reconnects by itself, without a recovery (the trainer opened once and
// never restored, every epoch committed once), with one row per epoch in
// epochs, checkpoints and backtests, and every checkpoint bit-identical to
// an uninterrupted run.
func TestRunSurvivesTemporalServerKill(t *testing.T) {
	s, srv := newRestartableStack(t)
	w := s.startWorkerEnv("worker", []string{faults.EnvPlan + "=delay:train=1s"})
	runID, cfg := startFaultRun(t, s, "e2e-temporal")
	waitTraining(t, s, runID, w)
	killedAt := time.Now()
	if err := srv.proc.kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	restart := time.Since(killedAt)
	res := s.waitClosed(runID, 5*time.Minute, w)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d", res.Status, res.Epochs, cfg.Epochs)
	}
	completed := time.Since(killedAt)
	checkNothingRedone(t, s, runID, cfg, w)
	checkRowsOncePerEpoch(t, s.dbURL, runID, cfg)
	rows := checkCheckpointRows(t, s, runID, cfg)
	n := compareWithUninterrupted(t, s, cfg, rows)
	t.Logf("Temporal server killed during epoch 2 and started again %.1f s later; the run completed %.1f s after the kill without a recovery; %d checkpoints bit-identical (%d tensors)",
		restart.Seconds(), completed.Seconds(), len(rows), n)
}

// TestRunSurvivesWorkflowWorkerKill runs the workflows and the trainer in
// separate processes (--role control, --role gpu), kills the control
// process in the middle of a run, starts another, and checks that the GPU
// worker kept its trainer (opened once, never restored, every epoch
// committed once and every session activity run by that process) and that
// the run completes bit-identical to an uninterrupted run.
func TestRunSurvivesWorkflowWorkerKill(t *testing.T) {
	s := newStack(t)
	gpu := s.startWorkerEnv("gpu", []string{faults.EnvPlan + "=delay:train=1s"}, "--role", "gpu")
	ctl := s.startWorker("control-a", "--role", "control")
	runID, cfg := startFaultRun(t, s, "e2e-control")
	waitTraining(t, s, runID, gpu, ctl)
	killedAt := time.Now()
	if err := ctl.kill(); err != nil {
		t.Fatal(err)
	}
	ctl2 := s.startWorker("control-b", "--role", "control")
	res := s.waitClosed(runID, 5*time.Minute, gpu, ctl2)
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d", res.Status, res.Epochs, cfg.Epochs)
	}
	completed := time.Since(killedAt)
	checkNothingRedone(t, s, runID, cfg, gpu)
	rows := checkCheckpointRows(t, s, runID, cfg)
	n := compareWithUninterrupted(t, s, cfg, rows)
	t.Logf("control worker killed during epoch 2; run completed %.1f s later, the GPU worker's trainer opened once; %d checkpoints bit-identical (%d tensors)",
		completed.Seconds(), len(rows), n)
}

// checkNothingRedone checks in run id's history that the run never
// recovered: its trainer was opened once, new (a recovery opens it again,
// from a checkpoint), every epoch 1..cfg.Epochs was committed exactly once
// by a RunEpochs chunk, and every session activity ran on the process
// trainerProc (its identity starts with the process id).
func checkNothingRedone(t *testing.T, s *stack, id string, cfg config.RunConfig, trainerProc *proc) {
	t.Helper()
	if opens := trainerOpens(t, s.client, id); len(opens) != 1 || opens[0].Restored || opens[0].Reused {
		t.Errorf("run %s opened its trainer %s; want once, new: the run recovered", id, describeOpens(opens))
	}
	dc := converter.GetDefaultDataConverter()
	names := map[int64]string{}
	committed := map[int]int{}
	pid := strconv.Itoa(trainerProc.cmd.Process.Pid) + "@"
	for _, ev := range history(t, s.client, id) {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			if a.GetTaskQueue().GetName() != workflows.ControlTaskQueue {
				names[ev.GetEventId()] = a.GetActivityType().GetName()
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if name, ok := names[a.GetScheduledEventId()]; ok && !strings.HasPrefix(a.GetIdentity(), pid) {
				t.Errorf("run %s: session activity %s ran on %s, not on %s (pid %s)", id, name, a.GetIdentity(), trainerProc.name, pid[:len(pid)-1])
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			if names[a.GetScheduledEventId()] != "RunEpochs" {
				continue
			}
			var out activities.EpochsOutput
			if err := dc.FromPayloads(a.GetResult(), &out); err != nil {
				t.Fatalf("run %s: RunEpochs result: %v", id, err)
			}
			for _, e := range out.Epochs {
				committed[e.Epoch]++
			}
		}
	}
	for e := 1; e <= cfg.Epochs; e++ {
		if committed[e] != 1 {
			t.Errorf("run %s: epoch %d was committed %d times by RunEpochs chunks, want once (all: %v)", id, e, committed[e], committed)
		}
	}
	if len(committed) != cfg.Epochs {
		t.Errorf("run %s: RunEpochs committed epochs %v, want 1..%d", id, committed, cfg.Epochs)
	}
}
