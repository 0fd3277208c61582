//go:build chaos

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/faults"
)

// heldWrite matches the line a worker prints when trainer/faults holds a
// checkpoint write (hold:POINT=N): the point and the file.
var heldWrite = regexp.MustCompile(`faults: checkpoint write (\d+) held at (\S+): (\S+) `)

// heldEpoch is the epoch whose checkpoint write the test holds and kills:
// the run checkpoints every epoch, so it is the worker's write number
// heldEpoch, and two recorded checkpoints precede it.
const heldEpoch = 3

// TestKillInsideACheckpointWriteKeepsThePreviousOne kills (SIGKILL) the
// only worker inside its write of epoch 3's checkpoint, held there by
// trainer/faults (hold:POINT=3), at each point of the write:
//
//   - temp-synced: the temporary file complete and fsynced, not renamed.
//     At the kill epoch 3 has no file and no row.
//   - renamed: the file in place under its final name, its row not
//     recorded. At the kill epoch 3 has a complete file and no row; such a
//     file is ignored, never restored (the workflow restores recorded
//     checkpoints only, and the damaged-checkpoint fallback looks only at
//     epochs before the recorded one it replaces), and the retrained
//     epoch writes over it (docs/adr/0031-a-checkpoint-without-its-row.md).
//
// In both, a clean worker must restore epoch 2's checkpoint, the run must
// complete with every checkpoint recorded once and bit-identical to an
// uninterrupted run, no temporary file may be left, and the killed write's
// file must decode to the tensors of the epoch-3 checkpoint the run ends
// with (the write was whole at the point of the kill, and the redone
// epoch is the same).
func TestKillInsideACheckpointWriteKeepsThePreviousOne(t *testing.T) {
	for _, at := range []checkpoint.WritePoint{checkpoint.TempSynced, checkpoint.Renamed} {
		t.Run(string(at), func(t *testing.T) {
			s := newStack(t)
			a := s.startWorkerEnv("worker-a", []string{fmt.Sprintf("%s=hold:%s=%d", faults.EnvPlan, at, heldEpoch)})
			runID, cfg := startFaultRun(t, s, "e2e-ckwrite-"+string(at))
			ctx := context.Background()
			var (
				file   string
				victim pendingActivity
			)
			waitFor(t, fmt.Sprintf("worker A to hold its write of epoch %d's checkpoint at %s", heldEpoch, at), 3*time.Minute, 20*time.Millisecond, func() (bool, error) {
				if err := a.alive(); err != nil {
					return false, err
				}
				acts, err := s.pending(ctx, runID)
				if err != nil {
					return false, err
				}
				m := heldWrite.FindStringSubmatch(a.output())
				if m == nil {
					return false, nil
				}
				if m[1] != fmt.Sprint(heldEpoch) || m[2] != string(at) {
					return false, fmt.Errorf("worker A held write %s at %s, want write %d at %s", m[1], m[2], heldEpoch, at)
				}
				file = m[3]
				// The chunk beats on while its write is held; the recovery is
				// measured from its last heartbeat.
				for _, pa := range acts {
					if pa.trains() && pa.Started && pa.Heartbeat != nil {
						victim = pa
						return true, nil
					}
				}
				return false, nil
			})
			final := filepath.Join(filepath.Dir(file), fmt.Sprintf("epoch-%06d.safetensors", heldEpoch))
			if want := map[checkpoint.WritePoint]string{checkpoint.TempSynced: "." + filepath.Base(final) + ".tmp-", checkpoint.Renamed: filepath.Base(final)}[at]; !strings.HasPrefix(filepath.Base(file), want) {
				t.Fatalf("the held write is of %s, want %s…", file, want)
			}
			held, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			killedAt := time.Now()
			if err := a.kill(); err != nil {
				t.Fatal(err)
			}

			// Nothing half-visible: rows for epochs 1 and 2 only, each naming
			// its whole file; epoch 3's final name absent (temp-synced) or a
			// complete file without a row (renamed).
			recorded := recordedEpochs(t, s, runID)
			if fmt.Sprint(recorded) != fmt.Sprint([]int{1, 2}) {
				t.Fatalf("at the kill the run has checkpoint rows for epochs %v, want [1 2]", recorded)
			}
			_, finalErr := os.Stat(final)
			switch at {
			case checkpoint.TempSynced:
				if !errors.Is(finalErr, fs.ErrNotExist) {
					t.Fatalf("killed before the rename, %s exists (%v)", final, finalErr)
				}
			case checkpoint.Renamed:
				if _, _, err := checkpoint.Read(context.Background(), final, checkpoint.Options{}); err != nil {
					t.Fatalf("killed after the rename, %s is not a whole checkpoint: %v", final, err)
				}
			}

			b := s.startWorkerEnv("worker-b", []string{faults.EnvPlan + "=delay:train=1500ms"})
			rec := measureRecovery(t, s, runID, victim, killedAt)
			res := s.waitClosed(runID, 5*time.Minute, b)
			if res.Status != metadata.StatusCompleted || res.Epochs != cfg.Epochs {
				t.Fatalf("run result: %s, %d epochs; want completed, %d epochs", res.Status, res.Epochs, cfg.Epochs)
			}
			opens := trainerOpens(t, s.client, runID)
			if len(opens) != 2 || !opens[1].Restored || opens[1].Epoch != heldEpoch-1 || opens[1].Fallback != nil {
				t.Fatalf("the run opened its trainer %s; want a new one on A, then on B a restore of epoch %d's checkpoint, the last one recorded before the kill", describeOpens(opens), heldEpoch-1)
			}
			rows := checkCheckpointRows(t, s, runID, cfg)
			n := compareWithUninterrupted(t, s, cfg, rows)
			// The killed write was whole, and it is the state the run ends
			// with at that epoch. (The files differ in the config in their
			// metadata: a restored CPU trainer records device "cpu" where
			// the run's config says "auto".)
			if rows[heldEpoch-1].URI != final {
				t.Fatalf("epoch %d's checkpoint row names %s, want %s", heldEpoch, rows[heldEpoch-1].URI, final)
			}
			killed, _, err := checkpoint.Decode(held)
			if err != nil {
				t.Fatalf("the killed write's file %s: %v", file, err)
			}
			ended, _, err := checkpoint.ReadVerified(context.Background(), final, rows[heldEpoch-1].SHA256, checkpoint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			equalTensors(t, heldEpoch, ended, killed)
			if tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(final), ".*.tmp-*")); len(tmps) != 0 {
				t.Fatalf("temporary files left in %s: %v", filepath.Dir(final), tmps)
			}
			t.Logf("SIGKILL at %s of epoch %d's checkpoint write (%d bytes): epoch %d restored, training again %.2f s later; %d checkpoints bit-identical to the uninterrupted run (%d tensors); no temporary file left",
				at, heldEpoch, len(held), heldEpoch-1, rec.RecoveryS, len(rows), n)
		})
	}
}

// recordedEpochs returns the epochs of run id's checkpoint rows, after
// checking that each row names a file with the recorded size and SHA-256.
func recordedEpochs(t *testing.T, s *stack, runID string) []int {
	t.Helper()
	var epochs []int
	for _, r := range s.checkpointRows(t, runID) {
		if _, _, err := checkpoint.ReadVerified(context.Background(), r.URI, r.SHA256, checkpoint.Options{}); err != nil {
			t.Errorf("the row of epoch %d names a file that is not whole: %v", r.Epoch, err)
		}
		epochs = append(epochs, r.Epoch)
	}
	return epochs
}
