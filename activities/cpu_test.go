package activities_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer/cpu"
)

// tinyCPUConfig is a config the CPU backend trains in milliseconds.
func tinyCPUConfig() config.RunConfig {
	c := config.Defaults()
	c.Data.Path, c.Data.SyntheticBars = prices.SyntheticPath, 3000
	c.Model.Trunk1, c.Model.Trunk2, c.Model.Head, c.Model.Atoms = 16, 16, 8, 11
	c.StepsPerEpoch, c.BatchSize = 5, 16
	c.Env.NumEnvs, c.Env.CollectSteps, c.Env.EpisodeBars = 4, 16, 64
	c.Replay.Capacity, c.Replay.Warmup = 1000, 32
	return c
}

// checkpointedCPURun trains run cfg for one epoch on worker a of two CPU
// workers that share a checkpoint root and store, and checkpoints it.
func checkpointedCPURun(t *testing.T, cfg config.RunConfig) (a, b *rig, ck activities.CheckpointOutput) {
	t.Helper()
	root := t.TempDir()
	a = newRig(t, root, nil)
	b = newRig(t, root, a.store)
	for _, r := range []*rig{a, b} {
		r.a.Backend, r.a.Prepare = cpu.Backend{}, nil
	}
	a.open(activities.OpenInput{Config: cfg})
	a.epoch(1)
	a.must(a.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, &ck)
	return a, b, ck
}

// TestCPURunRestoredOnAnotherWorkerIsBitIdentical runs the real CPU backend
// and market data through the activities: a run checkpointed after epoch 1
// and restored on a second worker must hold, after epoch 2, exactly the
// state of the run that never stopped.
func TestCPURunRestoredOnAnotherWorkerIsBitIdentical(t *testing.T) {
	cfg := tinyCPUConfig()
	a, b, ck := checkpointedCPURun(t, cfg)
	if out := b.open(activities.OpenInput{Config: cfg, Epoch: 1, GlobalStep: ck.Checkpoint.GlobalStep, Resume: &ck.Checkpoint}); !out.Restored {
		t.Fatalf("second worker did not restore: %+v", out)
	}
	a.epoch(2)
	b.epoch(2)
	sa, err := a.reg.Get(runID).Trainer.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.reg.Get(runID).Trainer.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(sa.Tensors) != len(sb.Tensors) {
		t.Fatalf("%d tensors after the restore, %d without", len(sb.Tensors), len(sa.Tensors))
	}
	for i, ta := range sa.Tensors {
		if tb := sb.Tensors[i]; ta.Name != tb.Name || !bytes.Equal(ta.Data, tb.Data) {
			t.Errorf("tensor %s differs after the restore", ta.Name)
		}
	}
}

// TestConfigTheBackendCannotRunIsFatal: a run asking the CPU backend for a
// CUDA device ends with a non-retryable InvalidConfig error that names the
// problem, instead of recovering forever or running something else.
func TestConfigTheBackendCannotRunIsFatal(t *testing.T) {
	for _, c := range []struct{ device, precision, want string }{
		{"cuda:0", config.PrecisionFP32, `device "cuda:0"`},
		{"cuda", config.PrecisionBF16, `device "cuda"`},
	} {
		cfg := tinyCPUConfig()
		cfg.Device, cfg.Precision = c.device, c.precision
		r := newRig(t, t.TempDir(), nil)
		r.a.Backend, r.a.Prepare = cpu.Backend{}, nil
		err := r.do(r.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: cfg}, nil)
		if errType(err) != activities.ErrTypeInvalidConfig || !activities.IsFatal(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("device %s precision %s: %v, want a fatal %s error mentioning %s", c.device, c.precision, err, activities.ErrTypeInvalidConfig, c.want)
		}
	}
}

// TestOpenCloseCyclesLeakNothing opens a run's trainer on the CPU backend,
// collects, trains, checkpoints and closes it, 100 times, and checks that
// neither goroutines nor heap grow: after the cycles the goroutines are
// back to their number after the first cycle, and the live heap (after a
// collection) has not grown by more than one trainer's worth.
func TestOpenCloseCyclesLeakNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("100 trainer cycles")
	}
	cfg := tinyCPUConfig()
	r := newRig(t, t.TempDir(), nil)
	r.a.Backend, r.a.Prepare = cpu.Backend{}, nil
	cycle := func(i int) {
		r.open(activities.OpenInput{Config: cfg})
		r.epoch(1)
		r.must(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, nil)
		r.must(r.a.CloseTrainer, activities.CloseInput{RunID: runID}, nil)
		if r.reg.Get(runID) != nil {
			t.Fatalf("cycle %d: the registry still holds the run after CloseTrainer", i)
		}
	}
	live := func() (goroutines int, heap uint64) {
		// Goroutines that end asynchronously (heartbeat tickers) get a
		// moment; then the heap is measured after two collections.
		deadline := time.Now().Add(2 * time.Second)
		n := runtime.NumGoroutine()
		for time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			if m := runtime.NumGoroutine(); m == n {
				break
			} else {
				n = m
			}
		}
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return n, ms.HeapAlloc
	}
	cycle(0)
	g0, h0 := live()
	for i := 1; i <= 100; i++ {
		cycle(i)
	}
	g1, h1 := live()
	t.Logf("after 1 cycle: %d goroutines, heap %.1f MB; after 101: %d goroutines, heap %.1f MB", g0, float64(h0)/1e6, g1, float64(h1)/1e6)
	if g1 > g0+2 {
		t.Errorf("goroutines grew from %d to %d over 100 cycles", g0, g1)
	}
	if h1 > h0+8<<20 {
		t.Errorf("live heap grew from %.1f MB to %.1f MB over 100 cycles", float64(h0)/1e6, float64(h1)/1e6)
	}
}

// TestRunFromBeforeDropFeaturesResumesWithItsInputs: a run whose
// checkpoint shows the policy every feature (written before
// data.drop_features existed, or with it set to "") restores when its
// workflow input now decodes to the default, which hides some, and goes on
// with the checkpoint's inputs instead of being refused for a different
// normaliser.
func TestRunFromBeforeDropFeaturesResumesWithItsInputs(t *testing.T) {
	old := tinyCPUConfig()
	old.Data.DropFeatures = ""
	_, b, ck := checkpointedCPURun(t, old)
	now := tinyCPUConfig()
	if now.Data.DropFeatures == "" {
		t.Fatal("the default hides no feature; this test needs one that does")
	}
	if out := b.open(activities.OpenInput{Config: now, Epoch: 1, GlobalStep: ck.Checkpoint.GlobalStep, Resume: &ck.Checkpoint}); !out.Restored {
		t.Fatalf("second worker did not restore: %+v", out)
	}
	if d := b.reg.Get(runID).Dataset.Norm.Drop; d != 0 {
		t.Errorf("restored run hides features %#x, want the checkpoint's none", d)
	}
	b.epoch(2)
}
