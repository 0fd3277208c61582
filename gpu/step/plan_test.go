package step

import (
	"github.com/dqnflow/dqnflow/gpu/device"
	"strings"
	"testing"
)

// The loss's blocks each add their rows' bias gradients, so its rows are
// split into blocks once per batch size: every row in exactly one block,
// no block empty, whole sample slots a block, and never more blocks (and
// so parts to add) than the slots (lossSlots by default).
func TestLossRowsCoverTheBatch(t *testing.T) {
	for _, slots := range []int{device.DefaultTuning().LossSlots, 924} {
		for n := 1; n <= 70000; n++ {
			r := lossRows(n, slots)
			blocks := device.CeilDiv(n, r)
			switch {
			case r%lossSamplesPerBlock != 0:
				t.Fatalf("batch %d: %d rows a block, not a multiple of %d", n, r, lossSamplesPerBlock)
			case blocks > slots:
				t.Fatalf("batch %d: %d blocks, more than %d slots", n, blocks, slots)
			case (blocks-1)*r >= n:
				t.Fatalf("batch %d: %d blocks of %d rows leave the last empty", n, blocks, r)
			}
		}
	}
	if r := lossRows(16384, device.DefaultTuning().LossSlots); r != 4 {
		t.Errorf("batch 16384: %d rows a block, want 4 (4096 blocks)", r)
	}
}

// A model whose loss block would not fit in static shared memory is
// refused by name before NVRTC sees it; the default and every atom count
// the compile test builds fit.
func TestLossSharedMemoryBoundsTheAtoms(t *testing.T) {
	maxA := maxLossAtoms()
	if lossShared(maxA) > 48<<10 || lossShared(maxA+1) <= 48<<10 {
		t.Fatalf("maxLossAtoms %d: %d and %d bytes", maxA, lossShared(maxA), lossShared(maxA+1))
	}
	if maxA < 101 {
		t.Fatalf("maxLossAtoms %d: below the atoms the compile test builds (101)", maxA)
	}
}

// TestTrainPartsForkAtTheSpectralBranch checks where the training step's
// graph forks: every launch once, in the order of the step, the power
// iteration on a branch of its own before AdamW and the refresh, which
// run as one launch (ADR 0025, ADR 0028).
func TestTrainPartsForkAtTheSpectralBranch(t *testing.T) {
	named := func(n string) device.Launch { return device.Launch{Name: n} }
	p := &stepPlan{
		sampleL: named("sample"), lossSampled: named("c51_loss"),
		Fwd:     []device.Launch{named("f1"), named("f2"), named("f3"), named("f4")},
		Bwd:     []device.Launch{named("b1"), named("b2"), named("b3"), named("b4")},
		reduceL: named("grad_reduce"), normL: named("grad_norm"), adamL: named("adamw"), specL: named("spectral"),
		adamRefreshL: named("adamw_refresh"),
		prioL:        []device.Launch{named("prio_claim"), named("prio_set")},
	}
	l := &Learner{specRefresh: named("refresh")}
	grad := "sample f1 f2 f3 f4 c51_loss b1 b2 b3 b4 grad_reduce grad_norm"
	join := func(ls []device.Launch) string {
		names := make([]string, len(ls))
		for i, ln := range ls {
			names[i] = ln.Name
		}
		return strings.Join(names, " ")
	}
	early, g, u, prio := l.trainParts(p)
	if join(early) != "spectral" || join(g) != grad || join(u) != "adamw_refresh" || join(prio) != "prio_claim prio_set" {
		t.Errorf("early %q, grad %q, update %q, prio %q", join(early), join(g), join(u), join(prio))
	}
	if got, want := join(l.TrainLaunches(p)), grad+" spectral adamw_refresh prio_claim prio_set"; got != want {
		t.Errorf("trainLaunches %q, want %q", got, want)
	}
}
