//go:build chaos

package e2e

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/internal/testproc"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/store/storetest"
	"github.com/dqnflow/dqnflow/trainer/faults"
	"github.com/dqnflow/dqnflow/worker"
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
	waitFor(t, "epoch 2 to train", 3*time.Minute, 50*time.Millisecond, func() (bool, error) {
		for _, p := range procs {
			if err := p.alive(); err != nil {
				return false, err
			}
		}
		acts, err := s.pending(context.Background(), id)
		for _, pa := range acts {
			if pa.in("train") && pa.Started && pa.Heartbeat != nil && pa.Heartbeat.Epoch >= 2 {
				return true, nil
			}
		}
		return false, err
	})
}

// TestRunSurvivesTemporalServerKill kills (SIGKILL) the Temporal dev server
// in the middle of a run, starts it again on its SQLite file, and checks
// that the run completes, bit-identical to an uninterrupted run, with the
// same worker, which reconnects by itself.
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
	t.Logf("Temporal server killed during epoch 2 and started again %.1f s later", time.Since(killedAt).Seconds())
	res := s.waitClosed(runID, 5*time.Minute, w)
	if res.Status != store.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d", res.Status, res.Epochs, cfg.Epochs)
	}
	rows := checkCheckpointRows(t, s, runID, cfg)
	compareWithUninterrupted(t, s, cfg, rows)
	t.Logf("completed %.1f s after the kill", time.Since(killedAt).Seconds())
}

// TestRunSurvivesWorkflowWorkerKill runs the workflows and the trainer in
// separate processes (--role control, --role gpu), kills the control
// process in the middle of a run, starts another, and checks that the run
// completes bit-identical to an uninterrupted run.
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
	if res.Status != store.StatusCompleted || res.Epochs != cfg.Epochs {
		t.Fatalf("run result: %s, %d epochs; want completed, %d", res.Status, res.Epochs, cfg.Epochs)
	}
	rows := checkCheckpointRows(t, s, runID, cfg)
	compareWithUninterrupted(t, s, cfg, rows)
	t.Logf("control worker killed during epoch 2; run completed %.1f s later", time.Since(killedAt).Seconds())
}
