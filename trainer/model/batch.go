package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/market"
)

// ErrNotFinite is wrapped by errors about NaN or Inf inputs: a batch value
// or a checkpoint tensor. (Divergence during training wraps
// trainer.ErrNonFinite instead.)
var ErrNotFinite = errors.New("not finite")

// Batch is one minibatch of n-step transitions for a training step. Its
// length n is len(Return); every other field must match it exactly.
type Batch struct {
	Obs      []float32 // n×ObsDim: the state s
	Actions  []int32   // n×NumBranches: the action taken in s (direction, size, exit)
	Return   []float32 // n: the n-step discounted return R = Σ_k γᵏ r_k
	Discount []float32 // n: γⁿ·(1 − done), in [0, 1]
	NextObs  []float32 // n×ObsDim: the state s′ n steps later
	Weight   []float32 // n: prioritised-replay importance weight, ≥ 0
}

// Check validates the batch and returns its length n: every slice has the
// length n implies, every action is inside its branch, Return is finite,
// Discount in [0, 1] and Weight finite and not negative. Observations are
// not checked (a NaN there shows up as a non-finite loss).
func (b *Batch) Check() (int, error) {
	if b == nil {
		return 0, fmt.Errorf("batch: nil")
	}
	n := len(b.Return)
	if n == 0 {
		return 0, fmt.Errorf("batch: empty (Return has no values)")
	}
	for _, f := range []struct {
		name      string
		got, want int
	}{
		{"Obs", len(b.Obs), n * market.ObsDim},
		{"NextObs", len(b.NextObs), n * market.ObsDim},
		{"Actions", len(b.Actions), n * NumBranches},
		{"Discount", len(b.Discount), n},
		{"Weight", len(b.Weight), n},
	} {
		if f.got != f.want {
			return 0, fmt.Errorf("batch: %s has %d values, want %d for %d samples", f.name, f.got, f.want, n)
		}
	}
	for i := 0; i < n; i++ {
		for d, nd := range market.BranchSizes {
			if a := b.Actions[i*NumBranches+d]; a < 0 || int(a) >= nd {
				return 0, fmt.Errorf("batch: Actions[%d] (sample %d, branch %d) = %d: must be in [0, %d)", i*NumBranches+d, i, d, a, nd)
			}
		}
		if !finite32(b.Return[i]) {
			return 0, fmt.Errorf("batch: Return[%d] = %g: %w", i, b.Return[i], ErrNotFinite)
		}
		if d := b.Discount[i]; !(d >= 0 && d <= 1) {
			return 0, fmt.Errorf("batch: Discount[%d] = %g: must be in [0, 1]", i, d)
		}
		if w := b.Weight[i]; !(w >= 0) || !finite32(w) {
			return 0, fmt.Errorf("batch: Weight[%d] = %g: must be finite and not negative", i, w)
		}
	}
	return n, nil
}

// finite32 reports whether x is neither NaN nor ±Inf.
func finite32(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }

// FirstNonFinite returns the index of the first NaN or Inf in x, or -1.
func FirstNonFinite(x []float32) int {
	for i, v := range x {
		if !finite32(v) {
			return i
		}
	}
	return -1
}
