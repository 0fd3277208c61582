package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestPauseResumeStopThroughCLI drives a run with the dqnflow command line
// against a real worker: run start, pause (the run checkpoints, frees its
// trainer and waits), resume (it trains on), stop (a final checkpoint, then
// status stopped), and checkpoint list --json.
func TestPauseResumeStopThroughCLI(t *testing.T) {
	endToEnd(t, "the Temporal dev server and worker processes")
	began := time.Now()
	s := newStack(t)
	w := s.startWorker("worker")

	cfg := trainertest.SmallConfig()
	cfg.Epochs = 10000 // never reached: the run ends by stop
	// Nor by early stopping: a chunk of epochs (ADR 0010) may run several
	// backtests before the pause is taken.
	cfg.Backtest.Patience = 0
	cfg.StepsPerEpoch = 20
	cfg.Checkpoint.KeepLast = 10000
	cfg.Checkpoint.Dir = filepath.Join(s.dir, "checkpoints")
	cfgPath := writeConfig(t, filepath.Join(s.dir, "run.json"), cfg)

	runID := "e2e-cli-" + randomHex(t, 4)
	var started struct {
		RunID string `json:"run_id"`
	}
	decode(t, s.dqnflow("run", "start", "--config", cfgPath, "--id", runID, "--json"), &started)
	if started.RunID != runID {
		t.Fatalf("run start --id %s --json printed run_id %q", runID, started.RunID)
	}
	ctx := context.Background()
	progress := func() workflows.Progress {
		t.Helper()
		v, err := s.client.QueryWorkflow(ctx, runID, "", workflows.ProgressQuery)
		if err != nil {
			t.Fatalf("query run %s: %v", runID, err)
		}
		var p workflows.Progress
		if err := v.Get(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// until waits for the run's progress to satisfy ok.
	until := func(what string, ok func(workflows.Progress) bool) workflows.Progress {
		t.Helper()
		var p workflows.Progress
		waitFor(t, what, time.Minute, 50*time.Millisecond, func() (bool, error) {
			if err := w.alive(); err != nil {
				return false, err
			}
			if _, err := s.pending(ctx, runID); err != nil {
				return false, err
			}
			p = progress()
			return ok(p), nil
		})
		return p
	}
	until("the run to finish epoch 1", func(p workflows.Progress) bool { return p.Epoch >= 1 })

	s.dqnflow("run", "pause", runID)
	paused := until("the run to pause", func(p workflows.Progress) bool {
		return p.Status == metadata.StatusPaused && p.Phase == "paused"
	})
	if ck := paused.LastCheckpoint; ck == nil || ck.Epoch != paused.Epoch {
		t.Errorf("paused after epoch %d with last checkpoint %+v: a pause checkpoints the epoch", paused.Epoch, ck)
	}
	acts, err := s.pending(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		t.Errorf("paused run has activity %s (%s) in flight; a paused run holds no trainer", a.Type, a.ID)
	}
	var shown struct {
		Progress workflows.Progress `json:"progress"`
	}
	decode(t, s.dqnflow("run", "show", runID, "--json"), &shown)
	if shown.Progress.Status != metadata.StatusPaused || shown.Progress.Epoch != paused.Epoch {
		t.Errorf("run show --json: status %s at epoch %d, want paused at epoch %d", shown.Progress.Status, shown.Progress.Epoch, paused.Epoch)
	}

	s.dqnflow("run", "resume", runID)
	until("the run to train past the paused epoch", func(p workflows.Progress) bool {
		return p.Status == metadata.StatusRunning && p.Epoch > paused.Epoch
	})

	s.dqnflow("run", "stop", runID)
	res := s.waitClosed(runID, 2*time.Minute, w)
	if res.Status != metadata.StatusStopped || res.Epochs <= paused.Epoch || res.Epochs >= cfg.Epochs {
		t.Fatalf("run result: status %s after %d epochs; want stopped after more than the %d before the pause", res.Status, res.Epochs, paused.Epoch)
	}
	if ck := res.LastCheckpoint; ck == nil || ck.Epoch != res.Epochs {
		t.Errorf("stopped after epoch %d with last checkpoint %+v: a stop checkpoints the epoch", res.Epochs, ck)
	}

	var rows []map[string]any
	decode(t, s.dqnflow("checkpoint", "list", runID, "--json"), &rows)
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	have := map[int]bool{}
	for i, r := range rows {
		epoch, ok := r["epoch"].(float64)
		uri, _ := r["uri"].(string)
		sum, _ := r["sha256"].(string)
		if !ok || uri == "" || !hex64.MatchString(sum) {
			t.Fatalf("checkpoint list --json item %d lacks epoch, uri or sha256: %v", i, r)
		}
		have[int(epoch)] = true
		if pruned, _ := r["pruned"].(bool); pruned {
			continue
		}
		b, err := os.ReadFile(uri)
		if err != nil {
			t.Errorf("checkpoint of epoch %d: %v", int(epoch), err)
			continue
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("checkpoint of epoch %d: %s has sha256 %x, listed %s", int(epoch), uri, got, sum)
		}
	}
	if !have[paused.Epoch] || !have[res.Epochs] {
		t.Errorf("checkpoint list has epochs %v; want the paused epoch %d and the final epoch %d", slices.Sorted(maps.Keys(have)), paused.Epoch, res.Epochs)
	}
	t.Logf("paused after epoch %d, stopped after epoch %d; %d checkpoints listed; test took %.1f s",
		paused.Epoch, res.Epochs, len(rows), time.Since(began).Seconds())
}

// decode decodes out from a command's JSON output.
func decode(t *testing.T, output string, out any) {
	t.Helper()
	if err := json.Unmarshal([]byte(strings.TrimSpace(output)), out); err != nil {
		t.Fatalf("decode %T from the command's output: %v\n%s", out, err, output)
	}
}
