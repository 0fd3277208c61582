package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Beta is the importance-sampling exponent at gradient step step, annealed
// linearly from beta0 to 1 over betaSteps steps (Schaul et al. 2016, §3.4):
//
//	β(step) = β₀ + (1 − β₀)·min(step, betaSteps)/betaSteps.
//
// A negative step counts as 0; betaSteps ≤ 0 means no annealing period, so
// β is 1 from the start.
func Beta(beta0 float64, step, betaSteps int) float64 {
	if betaSteps <= 0 {
		return 1
	}
	s := min(max(step, 0), betaSteps)
	return beta0 + (1-beta0)*float64(s)/float64(betaSteps)
}

// Sample draws batch indices by stratified proportional sampling and writes
// them to idx[:batch], with their normalised importance-sampling weights
// in weights[:batch] (T = Total, B = batch, N = Len):
//
//	u_k = (k + r_k)·T/B,   r_k = rng.Float64(), k = 0..B−1
//	idx[k] = the leaf whose cumulative mass range holds u_k
//	w_k = (N·P(idx[k]))^−β / max_j (N·P(idx[j]))^−β
//	    = (m_min / m_idx[k])^β,   m_min = min_j m_idx[j]
//
// N and T cancel in the batch normalisation, so Sample computes the second
// form, in float64, and rounds it to float32: it has the same value without
// the overflow of (N·P)^−β when P is tiny, and it is exactly 1 for the
// smallest mass in the batch. It consumes exactly batch values of rng, in
// segment order, so a caller that checkpoints rng and the buffer resumes the
// same sequence of batches. beta must be in [0, 1] (see Beta). Sample never
// returns an empty slot or one with zero mass, even when rounding puts u_k
// at T (see sumTree.find).
func (b *Buffer) Sample(rng *rand.Rand, batch int, beta float64, idx []int, weights []float32) error {
	switch {
	case rng == nil:
		return fmt.Errorf("replay sample: nil rng: %w", ErrInvalid)
	case batch < 1:
		return fmt.Errorf("replay sample: batch %d is not positive: %w", batch, ErrInvalid)
	case len(idx) < batch:
		return fmt.Errorf("replay sample: idx has %d entries, batch is %d: %w", len(idx), batch, ErrInvalid)
	case len(weights) < batch:
		return fmt.Errorf("replay sample: weights has %d entries, batch is %d: %w", len(weights), batch, ErrInvalid)
	case !(beta >= 0 && beta <= 1):
		return fmt.Errorf("replay sample: beta %v outside [0, 1]: %w", beta, ErrInvalid)
	case b.size == 0:
		return fmt.Errorf("replay sample: %w", ErrEmpty)
	}
	total := b.tree.total()
	if !(total > 0) || math.IsInf(total, 1) {
		// Unreachable while masses are (p ≥ ε > 0)^α with α ≤ 1; kept so a
		// broken invariant is an error rather than a wrong batch.
		return fmt.Errorf("replay sample: total mass %v is not positive and finite", total)
	}
	segment := total / float64(batch)
	minMass := math.Inf(1)
	for k := range batch {
		u := (float64(k) + rng.Float64()) * segment
		i := b.tree.find(u)
		idx[k] = i
		minMass = min(minMass, b.tree.get(i))
	}
	for k := range batch {
		weights[k] = float32(math.Pow(minMass/b.tree.get(idx[k]), beta))
	}
	return nil
}

// UpdatePriorities sets the priority of each slot idx[k] from the
// per-sample loss loss[k] (Schaul et al. 2016, Algorithm 1, line 12):
//
//	p_i = float64(loss_k) + ε,   m_i = p_i^α,   p_max = max(p_max, p_i).
//
// A loss must be finite and non-negative, and every index in [0, Len); the
// first bad pair is reported with its position and nothing is updated.
// When an index appears more than once, the last pair wins.
func (b *Buffer) UpdatePriorities(idx []int, loss []float32) error {
	if len(idx) != len(loss) {
		return fmt.Errorf("replay update priorities: %d indices but %d losses: %w", len(idx), len(loss), ErrInvalid)
	}
	for k, i := range idx {
		if i < 0 || i >= b.size {
			return fmt.Errorf("replay update priorities: idx[%d] = %d outside [0, %d): %w", k, i, b.size, ErrInvalid)
		}
		if l := float64(loss[k]); !(l >= 0) || math.IsInf(l, 1) {
			return fmt.Errorf("replay update priorities: loss[%d] = %v for index %d is not finite and non-negative: %w", k, loss[k], i, ErrInvalid)
		}
	}
	for k, i := range idx {
		p := float64(loss[k]) + b.eps
		b.maxPrio = max(b.maxPrio, p)
		b.tree.set(i, math.Pow(p, b.alpha))
	}
	return nil
}
