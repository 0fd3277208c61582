package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/doctor"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/worker/workertest"
)

// TestTrainSaysInOneShortLineWhyItUsesTheCPU: on a machine without the
// NVIDIA driver, "train --device auto" says so in one short line before
// anything else (here: a missing data file), and the driver error with
// the libraries it tried only under --verbose and in doctor.
func TestTrainSaysInOneShortLineWhyItUsesTheCPU(t *testing.T) {
	if _, err := cuda.Devices(); !errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("this machine has the NVIDIA driver (cuda.Devices: %v)", err)
	}
	missing := filepath.Join(t.TempDir(), "nope.csv")
	_, errOut, code := run(t, "train", "--device", "auto", "--data", missing)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[1], "nope.csv") {
		t.Fatalf("train with a missing file: exit %d, stderr:\n%s\nwant the device line and the error naming the file", code, errOut)
	}
	if !regexp.MustCompile(`^device: no NVIDIA driver found; using the CPU \(\d+ threads\)$`).MatchString(lines[0]) {
		t.Errorf("device line %q (%d characters); want \"device: no NVIDIA driver found; using the CPU (N threads)\"", lines[0], len(lines[0]))
	}
	_, errOut, _ = run(t, "train", "--device", "auto", "--data", missing, "--verbose")
	if !strings.Contains(errOut, "libcuda.so.1") || !strings.HasPrefix(errOut, "device: no NVIDIA driver found") {
		t.Errorf("train --verbose does not give the driver error after the short line:\n%s", errOut)
	}
	// doctor gives the whole error too: the folders searched included.
	if c := doctor.CheckGPU(); len(c) != 1 || !strings.HasPrefix(c[0].Detail, "no NVIDIA driver found") || !strings.Contains(c[0].Detail, "also searched") {
		t.Errorf("doctor's gpu check: %+v; want the short reason and the whole driver error", c)
	}
}

// TestReadingCommandsNameTheStoreOnlyWithVerbose: a command that reads
// the metadata store found without DATABASE_URL (the local server, or
// the SQLite file of the directory) does not print which one, unless
// --verbose asks.
func TestReadingCommandsNameTheStoreOnlyWithVerbose(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(dir, store.DefaultSQLiteFile))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	t.Chdir(dir)
	t.Setenv("DATABASE_URL", "")
	storeLine := regexp.MustCompile(`(?m)^metadata store: `)
	_, errOut, _ := run(t, "checkpoint", "list", "no-such-run")
	if storeLine.MatchString(errOut) {
		t.Errorf("checkpoint list names the store without --verbose:\n%s", errOut)
	}
	_, errOut, _ = run(t, "checkpoint", "list", "no-such-run", "--verbose")
	if !storeLine.MatchString(errOut) {
		t.Errorf("checkpoint list --verbose does not name the store:\n%s", errOut)
	}
}

// syncBuffer is a bytes.Buffer that a command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCommandsOnTemporalSayWhatTheyFound runs commands against a real
// Temporal dev server, the metadata in an SQLite file: "run watch" and
// "run show" of a run that exists nowhere say that it does not exist, and
// with the store unreachable give its error instead; a worker names its
// checkpoint directory by its absolute path and its metadata store.
func TestCommandsOnTemporalSayWhatTheyFound(t *testing.T) {
	clearTemporalEnv(t)
	addr, _ := workertest.DevServerAt(t, filepath.Join(t.TempDir(), "temporal.log"))
	dir := t.TempDir()
	t.Chdir(dir)
	sqlite := filepath.Join(dir, "metadata.db")
	t.Setenv("DATABASE_URL", "sqlite:"+sqlite)

	for _, args := range [][]string{{"run", "watch", "no-such-run"}, {"run", "show", "no-such-run"}} {
		_, errOut, code := run(t, append(args, "--address", addr)...)
		want := "run no-such-run does not exist: Temporal at " + addr + " (namespace default) has no workflow no-such-run, and the metadata store no run no-such-run"
		if code != 1 || !strings.Contains(errOut, want) || strings.Contains(errOut, "failed") {
			t.Errorf("dqnflow %s: exit %d, stderr:\n%s\nwant exit 1 and %q", strings.Join(args, " "), code, errOut, want)
		}
		// A store that cannot answer is no evidence that the run does not exist.
		t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
		_, errOut, code = run(t, append(args, "--address", addr)...)
		if code != 1 || strings.Contains(errOut, "does not exist") || !strings.Contains(errOut, "metadata store: ") || !strings.Contains(errOut, "127.0.0.1:1") {
			t.Errorf("dqnflow %s, the store unreachable: exit %d, stderr:\n%s\nwant exit 1 and the store's error, not that the run does not exist", strings.Join(args, " "), code, errOut)
		}
		t.Setenv("DATABASE_URL", "sqlite:"+sqlite)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"worker", "--role", "control", "--address", addr, "--checkpoint-store", "."}, &out, &errOut)
	}()
	want := "checkpoints in " + dir + ", data roots "
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(errOut.String(), want) {
		select {
		case code := <-done:
			t.Fatalf("worker exited %d before it was up:\n%s", code, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not say %q within a minute:\n%s", want, errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(errOut.String(), "metadata store: SQLite "+sqlite) {
		t.Errorf("the worker does not name its metadata store:\n%s", errOut.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("worker exited %d after the interrupt:\n%s", code, errOut.String())
	}
	if _, err := os.Stat(sqlite); err != nil {
		t.Errorf("the worker left no SQLite file: %v", err)
	}
}

// TestTrainRefusesABadTuningVariable: a DQNFLOW_* variable of the CUDA
// backend's tuning (gpu.TuningFromEnv) that holds a value no path runs,
// such as a removed one, stops train before it opens a backend, and the
// error names the variable and the tuning field.
func TestTrainRefusesABadTuningVariable(t *testing.T) {
	for env, field := range map[string]string{"DQNFLOW_PDL": "pdl", "DQNFLOW_STEPS_PER_GRAPH": "steps_per_graph"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, map[string]string{"DQNFLOW_PDL": "early", "DQNFLOW_STEPS_PER_GRAPH": "0"}[env])
			_, errOut, code := run(t, "train", "--device", "cpu", "--data", filepath.Join(t.TempDir(), "nope.csv"))
			if code == 0 || !strings.Contains(errOut, env) || !strings.Contains(errOut, field) || strings.Contains(errOut, "device:") {
				t.Errorf("train with %s set badly: exit %d, stderr:\n%s\nwant an error naming %s and %s before any device line", env, code, errOut, env, field)
			}
		})
	}
}
