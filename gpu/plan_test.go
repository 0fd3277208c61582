package gpu

import (
	"strings"
	"testing"
)

// The loss's blocks each add their rows' bias gradients, so its rows are
// split into blocks once per batch size: every row in exactly one block,
// no block empty, whole sample slots a block, and never more blocks (and
// so parts to add) than lossSlots.
func TestLossRowsCoverTheBatch(t *testing.T) {
	for n := 1; n <= 70000; n++ {
		r := lossRows(n)
		blocks := ceilDiv(n, r)
		switch {
		case r%lossSamplesPerBlock != 0:
			t.Fatalf("batch %d: %d rows a block, not a multiple of %d", n, r, lossSamplesPerBlock)
		case blocks > lossSlots:
			t.Fatalf("batch %d: %d blocks, more than lossSlots (%d)", n, blocks, lossSlots)
		case (blocks-1)*r >= n:
			t.Fatalf("batch %d: %d blocks of %d rows leave the last empty", n, blocks, r)
		}
	}
	if r := lossRows(16384); r != 4 {
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

// DQNFLOW_LOSS_SLOTS takes a block count and names itself when it
// refuses one.
func TestLossSlotsIsChecked(t *testing.T) {
	for v, want := range map[string]int{"": 0, "1": 1, "924": 924, "65536": 65536} {
		if got, err := parseLossSlots(v); err != nil || got != want {
			t.Errorf("parseLossSlots(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"0", "-8", "x", "65537"} {
		if _, err := parseLossSlots(v); err == nil || !strings.Contains(err.Error(), "DQNFLOW_LOSS_SLOTS") {
			t.Errorf("parseLossSlots(%q) = %v; want an error naming DQNFLOW_LOSS_SLOTS", v, err)
		}
	}
}

// TestSpectralBranchSettingIsChecked: DQNFLOW_SPECTRAL_BRANCH takes on (or
// nothing) and off, and names itself when it refuses a value.
func TestSpectralBranchSettingIsChecked(t *testing.T) {
	for v, want := range map[string]bool{"": true, "on": true, "off": false} {
		if got, err := parseSpectralBranch(v); err != nil || got != want {
			t.Errorf("parseSpectralBranch(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"On", "serial", "0"} {
		if _, err := parseSpectralBranch(v); err == nil || !strings.Contains(err.Error(), "DQNFLOW_SPECTRAL_BRANCH") {
			t.Errorf("parseSpectralBranch(%q) = %v; want an error naming DQNFLOW_SPECTRAL_BRANCH", v, err)
		}
	}
}

// TestStepsPerGraphSettingIsChecked: DQNFLOW_STEPS_PER_GRAPH takes a whole
// number of steps from 1 to maxStepsPerGraph (defaultStepsPerGraph when
// unset), and names itself when it refuses a value.
func TestStepsPerGraphSettingIsChecked(t *testing.T) {
	for v, want := range map[string]int{"": defaultStepsPerGraph, "1": 1, "4": 4, "64": maxStepsPerGraph} {
		if got, err := parseStepsPerGraph(v); err != nil || got != want {
			t.Errorf("parseStepsPerGraph(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"0", "-2", "65", "4.5", "four", " 4"} {
		if _, err := parseStepsPerGraph(v); err == nil || !strings.Contains(err.Error(), "DQNFLOW_STEPS_PER_GRAPH") {
			t.Errorf("parseStepsPerGraph(%q) = %v; want an error naming DQNFLOW_STEPS_PER_GRAPH", v, err)
		}
	}
}

// TestTrainPartsForkWhereTheSettingsSay checks where the training step's
// graph forks in each setting of DQNFLOW_SPECTRAL_BRANCH and
// DQNFLOW_ADAM_REFRESH: every launch once, in the order of the step, the
// power iteration before AdamW, and AdamW first in the update, where
// captureFork joins the early branch.
func TestTrainPartsForkWhereTheSettingsSay(t *testing.T) {
	named := func(n string) launch { return launch{name: n} }
	p := &stepPlan{
		sampleL: named("sample"), lossSampled: named("c51_loss"),
		fwd:     []launch{named("f1"), named("f2"), named("f3"), named("f4")},
		bwd:     []launch{named("b1"), named("b2"), named("b3"), named("b4")},
		reduceL: named("grad_reduce"), normL: named("grad_norm"), adamL: named("adamw"), specL: named("spectral"),
		adamRefreshL: named("adamw_refresh"),
		prioL:        []launch{named("prio_claim"), named("prio_set")},
	}
	l := &learner{specRefresh: named("refresh")}
	savedB, savedF := spectralBranch, adamRefreshFused
	defer func() { spectralBranch, adamRefreshFused = savedB, savedF }()
	grad := "sample f1 f2 f3 f4 c51_loss b1 b2 b3 b4 grad_reduce grad_norm"
	for _, fused := range []bool{false, true} {
		adamRefreshFused = fused
		upd := "adamw refresh"
		if fused {
			upd = "adamw_refresh"
		}
		for _, c := range []struct {
			branch                     bool
			early, grad, update, order string
		}{
			{true, "spectral", grad, upd, grad + " spectral " + upd},
			{false, "", grad + " spectral", upd, grad + " spectral " + upd},
		} {
			spectralBranch = c.branch
			early, g, u, prio := l.trainParts(p)
			join := func(ls []launch) string {
				names := make([]string, len(ls))
				for i, ln := range ls {
					names[i] = ln.name
				}
				return strings.Join(names, " ")
			}
			if join(early) != c.early || join(g) != c.grad || join(u) != c.update || join(prio) != "prio_claim prio_set" {
				t.Errorf("branch %v, fused %v: early %q, grad %q, update %q, prio %q; want %q, %q, %q",
					c.branch, fused, join(early), join(g), join(u), join(prio), c.early, c.grad, c.update)
			}
			if got := join(l.trainLaunches(p)); got != c.order+" prio_claim prio_set" {
				t.Errorf("branch %v, fused %v: trainLaunches %q", c.branch, fused, got)
			}
		}
	}
}

// TestAdamRefreshSettingIsChecked: DQNFLOW_ADAM_REFRESH takes fused (or
// nothing) and separate; anything else is an error that names the variable.
func TestAdamRefreshSettingIsChecked(t *testing.T) {
	for v, want := range map[string]bool{"": true, "fused": true, "separate": false} {
		if got, err := parseAdamRefresh(v); err != nil || got != want {
			t.Errorf("parseAdamRefresh(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"Fused", "on", "1"} {
		if _, err := parseAdamRefresh(v); err == nil || !strings.Contains(err.Error(), "DQNFLOW_ADAM_REFRESH") {
			t.Errorf("parseAdamRefresh(%q) = %v; want an error naming DQNFLOW_ADAM_REFRESH", v, err)
		}
	}
}
