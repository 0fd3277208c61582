package model

import (
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/market"
)

// FlatDir is the direction action that holds no position (market.Action's
// Dir 1).
const FlatDir = 1

// Greedy returns the greedy action of one observation from its expected
// values q (NumActions values, branch after branch, as QValues writes
// them), with a margin in favour of staying flat (ADR 0014):
//
//	dir  = argmax_a Q_dir(a)                 (the first on ties)
//	dir  = flat   if dir ≠ flat and Q_dir(dir) − Q_dir(flat) < margin
//	size = argmax_a Q_size(a), exit = argmax_a Q_exit(a)
//
// in float32, the difference rounded once. A position is taken or kept
// only when the network expects it to beat flat by at least margin;
// margin 0 is the plain argmax, bit for bit. Every backend's greedy policy
// (the CPU network, the CUDA collector's head_infer and backtest's btHead)
// computes exactly this.
func Greedy(q []float32, margin float32) market.Action {
	a := market.Action{
		Dir:  Argmax(q[BranchOffset[0]:BranchOffset[1]]),
		Size: Argmax(q[BranchOffset[1]:BranchOffset[2]]),
		Exit: Argmax(q[BranchOffset[2]:]),
	}
	if d := q[BranchOffset[0]:]; a.Dir != FlatDir && d[a.Dir]-d[FlatDir] < margin {
		a.Dir = FlatDir
	}
	return a
}

// CheckMargin checks a greedy margin: finite and not negative.
func CheckMargin(margin float32) error {
	if !(margin >= 0) || math.IsInf(float64(margin), 1) {
		return fmt.Errorf("greedy margin %g: must be finite and not negative", margin)
	}
	return nil
}

// Argmax returns the index of the first largest value of q: a branch's
// greedy action, and the double-DQN target's choice at s′, which takes no
// margin (it estimates the optimal value; ADR 0014).
func Argmax(q []float32) int {
	best := 0
	for i, x := range q {
		if x > q[best] {
			best = i
		}
	}
	return best
}
