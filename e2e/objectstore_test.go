package e2e

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
)

// TestRunMovesBetweenHostsThroughTheObjectStore runs two workers as if on
// two hosts: each with a local directory of its own and no storage in
// common, both pointing at the same Temporal, PostgreSQL and S3 bucket
// (versitygw). It kills (SIGKILL) the one that trains in the middle of an
// epoch; the other restores the run's last checkpoint from the bucket and
// finishes it. Every checkpoint is an object whose size and SHA-256 are
// the ones PostgreSQL records, bit-identical to an uninterrupted run, and
// neither worker wrote a checkpoint to its local directory. The S3 secret
// key is in neither worker's log, the run's row, a checkpoint nor the
// workflow history.
func TestRunMovesBetweenHostsThroughTheObjectStore(t *testing.T) {
	endToEnd(t, "the Temporal dev server, an S3 server and worker processes")
	began := time.Now()
	s := newStack(t)
	bucket := s.useS3("dqnflow")
	cfg := killConfig("checkpoints", calibrateSteps(t))
	t.Logf("config: %d epochs of %d steps, checkpoints in %s", cfg.Epochs, cfg.StepsPerEpoch, bucket)

	hosts := map[string]*proc{}
	pids := map[string]string{} // pid → worker name
	for _, name := range []string{"host-a", "host-b"} {
		local := filepath.Join(s.dir, name)
		// The later flag wins: the worker's local directory is never
		// its checkpoint store.
		p := s.startWorkerEnv(name, []string{"HOME=" + local, "TMPDIR=" + s.dir},
			"--checkpoint-dir", local, "--checkpoint-store", bucket)
		if !strings.Contains(p.output(), "checkpoints in s3://") {
			t.Fatalf("%s does not say it keeps checkpoints in the bucket:\n%s", name, p.tail(4<<10))
		}
		hosts[name] = p
		pids[strconv.Itoa(p.cmd.Process.Pid)] = name
	}

	runID := "e2e-s3-" + randomHex(t, 4)
	s.startRun(t, runID, cfg)

	victim := s.waitInTraining(runID, killEpoch)
	pid, _, _ := strings.Cut(victim.Worker, "@")
	trainer, ok := pids[pid]
	if !ok {
		t.Fatalf("%s runs on worker %q, which is neither host (pids %v)", victim.Type, victim.Worker, pids)
	}
	survivor := map[string]string{"host-a": "host-b", "host-b": "host-a"}[trainer]
	killedAt := time.Now()
	if err := hosts[trainer].kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL to %s during %s, training epoch %d at step %d/%d", trainer, victim.Type, victim.Heartbeat.Epoch, victim.Heartbeat.Step, victim.Heartbeat.Steps)

	res := s.waitClosed(runID, 5*time.Minute, hosts[survivor])
	if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs || res.GlobalStep != int64(cfg.Epochs*cfg.StepsPerEpoch) {
		t.Fatalf("run result: status %s, %d epochs, global step %d; want completed, %d epochs, global step %d",
			res.Status, res.Epochs, res.GlobalStep, cfg.Epochs, cfg.Epochs*cfg.StepsPerEpoch)
	}

	rows := checkCheckpointRows(t, s, runID, cfg)
	for _, r := range rows {
		if !strings.HasPrefix(r.URI, "s3://"+s.s3.Bucket+"/dqnflow/checkpoints/") {
			t.Errorf("checkpoint of epoch %d is at %s, not in the bucket", r.Epoch, r.URI)
		}
	}
	n := compareWithUninterrupted(t, s, cfg, rows)
	s3SecretIsNeverLoggedOrStored(t, s, runID, rows, hosts)

	// Nothing of the run was written to a local directory of either host.
	filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".safetensors") && !strings.HasPrefix(p, s.s3.Dir) {
			t.Errorf("a checkpoint was written to local disk: %s", p)
		}
		return nil
	})
	t.Logf("%s trained, was killed %.1f s into the test; %s resumed from the bucket; all %d checkpoints bit-identical to the uninterrupted run (%d tensors); test took %.1f s",
		trainer, killedAt.Sub(began).Seconds(), survivor, len(rows), n, time.Since(began).Seconds())
}

// s3SecretIsNeverLoggedOrStored fails the test if the S3 server's secret
// key appears in a worker's log, the run's row, a checkpoint object or the
// workflow's history.
func s3SecretIsNeverLoggedOrStored(t *testing.T, s *stack, runID string, rows []metadata.CheckpointRecord, hosts map[string]*proc) {
	t.Helper()
	secret := []byte(s.s3.Secret)
	leaks := func(where string, b []byte) {
		if bytes.Contains(b, secret) {
			t.Errorf("the S3 secret key appears in %s", where)
		}
	}
	for name, p := range hosts {
		leaks(name+"'s log", []byte(p.output()))
	}
	runLeavesNoSecret(t, s, runID, rows, leaks)
}
