// Package replay is the proportional prioritised experience replay buffer of
// the CPU reference trainer (Schaul, Quan, Antonoglou and Silver, 2016,
// "Prioritized Experience Replay", ICLR; §3.3 and Algorithm 1). The GPU
// backend implements the same semantics, so every rule below is exact.
//
// # Storage
//
// A Buffer holds up to Cap transitions in a ring: slot cursor receives the
// next transition, and once the buffer is full the oldest one is
// overwritten. Storage is a struct of arrays; observations are not stored,
// the trainer rebuilds them from the bar index and the agent features.
//
// # Priorities
//
// The priority of transition i is p_i = loss_i + ε (the per-sample loss the
// trainer reports, ε = ReplayConfig.PriorityEps > 0, so no transition has
// probability zero). The buffer stores its mass m_i = p_i^α
// (α = ReplayConfig.Alpha ∈ [0, 1]) and samples i with probability
//
//	P(i) = m_i / Σ_k m_k.
//
// A new transition gets the largest priority ever set, p_max (1 before any
// update), so that it is replayed at least once soon (Algorithm 1, line 6).
// p_max never decreases, even when the transition that set it is
// overwritten or given a lower priority.
//
// Masses live in a sum tree (see sumTree) of float64 values. Every internal
// node is recomputed as the sum of its two children whenever a leaf below it
// changes, so a node is always a pure function of the leaves under it: the
// tree carries no accumulated drift, and rebuilding it from the leaves after
// a checkpoint load gives the same bits as the tree that was saved.
//
// # Sampling
//
// Sample is stratified (Schaul et al. 2016, Appendix B.2.1): the total mass
// T is split into B equal segments and one point is drawn uniformly in each,
//
//	u_k = (k + r_k)·T/B,  k = 0..B−1,  r_k = rng.Float64(),
//
// consuming exactly one Float64 per sample in segment order. The sample is
// the leaf whose cumulative range [Σ_{j<i} m_j, Σ_{j≤i} m_j) holds u_k. An
// index can appear more than once in a batch. Importance-sampling weights
// correct the bias of non-uniform replay:
//
//	w_i = (N·P(i))^−β / max_{j in batch} w_j,
//
// with N the number of stored transitions and β annealed by Beta. The
// normalisation uses the largest weight of the batch, not of the whole
// buffer: the weights only scale updates down (the largest is exactly 1),
// and no second tree for the minimum priority is needed. N and the total
// cancel, so the weight is computed as (m_min/m_i)^β with m_min the smallest
// mass in the batch, which cannot overflow.
//
// # Checkpoints
//
// Tensors exports the stored transitions, their masses, the write cursor,
// the size, the capacity and p_max; Load restores them, so that sampling
// after a restore is bit-identical to sampling before it.
package replay
