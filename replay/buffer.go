package replay

import (
	"errors"
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// MaxCapacity is the largest capacity New accepts (the config's bound).
const MaxCapacity = 1 << 28

// Widths of the per-transition arrays.
const (
	agentWidth  = market.NumAgentFeatures
	actionWidth = len(market.BranchSizes)
)

// ErrInvalid is wrapped by every error about an argument, a transition or a
// checkpoint tensor that the buffer rejects.
var ErrInvalid = errors.New("replay: invalid input")

// ErrEmpty is returned by Sample when the buffer holds no transition.
var ErrEmpty = errors.New("replay: buffer is empty")

// Transition is one n-step transition (s, a, R, γⁿ(1−done), s′). States are
// stored as the bar index plus the agent's own features; the trainer
// rebuilds the observation (market.ObsDim values) from them.
type Transition struct {
	Bar   int32                            // bar index of s
	Agent [market.NumAgentFeatures]float32 // agent features of s
	// Action is the branch choices (direction, size, exit) taken at s.
	Action [3]int32
	// Return is the n-step discounted return Σ_{k<n} γᵏ r_{t+k}.
	Return float32
	// Discount is γⁿ·(1−done): 0 when the episode ended within the n steps.
	Discount  float32
	NextBar   int32                            // bar index of s′
	NextAgent [market.NumAgentFeatures]float32 // agent features of s′
}

// Batch is caller-owned storage for a gathered batch, row-major with one row
// per sampled index: Agent and NextAgent hold rows of
// market.NumAgentFeatures values, Action rows of 3.
type Batch struct {
	Bar       []int32
	Agent     []float32
	Action    []int32
	Return    []float32
	Discount  []float32
	NextBar   []int32
	NextAgent []float32
}

// NewBatch returns a Batch with room for n rows.
func NewBatch(n int) *Batch {
	n = max(n, 0)
	return &Batch{
		Bar:       make([]int32, n),
		Agent:     make([]float32, n*agentWidth),
		Action:    make([]int32, n*actionWidth),
		Return:    make([]float32, n),
		Discount:  make([]float32, n),
		NextBar:   make([]int32, n),
		NextAgent: make([]float32, n*agentWidth),
	}
}

// Buffer is a fixed-capacity ring of transitions with proportional
// priorities (see the package documentation). Methods are not safe for
// concurrent use.
type Buffer struct {
	capacity int
	alpha    float64 // α
	eps      float64 // ε
	size     int     // N, transitions stored
	cursor   int     // slot of the next Add
	maxPrio  float64 // p_max, largest priority ever set; 1 initially

	bar       []int32
	agent     []float32 // capacity × agentWidth
	action    []int32   // capacity × actionWidth
	ret       []float32
	discount  []float32
	nextBar   []int32
	nextAgent []float32 // capacity × agentWidth

	tree *sumTree // leaf i = m_i = p_i^α; zero for empty slots
}

// New returns an empty buffer with cfg.Capacity slots, exponent cfg.Alpha
// and priority offset cfg.PriorityEps. Beta0, BetaSteps and Warmup are the
// trainer's to use (see Beta).
func New(cfg config.ReplayConfig) (*Buffer, error) {
	if cfg.Capacity < 1 || cfg.Capacity > MaxCapacity {
		return nil, fmt.Errorf("new replay buffer: capacity %d outside [1, %d]: %w", cfg.Capacity, MaxCapacity, ErrInvalid)
	}
	if !(cfg.Alpha >= 0 && cfg.Alpha <= 1) {
		return nil, fmt.Errorf("new replay buffer: alpha %v outside [0, 1]: %w", cfg.Alpha, ErrInvalid)
	}
	if !(cfg.PriorityEps > 0) || math.IsInf(cfg.PriorityEps, 1) {
		return nil, fmt.Errorf("new replay buffer: priority_eps %v must be positive and finite: %w", cfg.PriorityEps, ErrInvalid)
	}
	return newBuffer(cfg.Capacity, cfg.Alpha, cfg.PriorityEps), nil
}

// newBuffer is an empty buffer of n slots whose next transition gets
// priority 1, its arguments already checked.
func newBuffer(n int, alpha, eps float64) *Buffer {
	return &Buffer{
		capacity:  n,
		alpha:     alpha,
		eps:       eps,
		maxPrio:   1,
		bar:       make([]int32, n),
		agent:     make([]float32, n*agentWidth),
		action:    make([]int32, n*actionWidth),
		ret:       make([]float32, n),
		discount:  make([]float32, n),
		nextBar:   make([]int32, n),
		nextAgent: make([]float32, n*agentWidth),
		tree:      newSumTree(n),
	}
}

// Len is N, the number of transitions stored.
func (b *Buffer) Len() int { return b.size }

// Cap is the capacity.
func (b *Buffer) Cap() int { return b.capacity }

// Total is Σ_i m_i = Σ_i p_i^α, the root of the sum tree.
func (b *Buffer) Total() float64 { return b.tree.total() }

// MaxPriority is p_max, the priority (before the exponent α) that the next
// Add gives its transition.
func (b *Buffer) MaxPriority() float64 { return b.maxPrio }

// Add stores t in slot cursor with mass p_max^α, overwriting the oldest
// transition once the buffer is full, and advances cursor to
// (cursor+1) mod Cap. It rejects, and stores nothing for, a transition with
// a negative bar index, an action outside its branch, a non-finite value or
// a discount outside [0, 1].
func (b *Buffer) Add(t Transition) error {
	if err := validateTransition(&t); err != nil {
		return fmt.Errorf("replay add: %w", err)
	}
	i := b.cursor
	b.bar[i] = t.Bar
	copy(b.agent[i*agentWidth:(i+1)*agentWidth], t.Agent[:])
	copy(b.action[i*actionWidth:(i+1)*actionWidth], t.Action[:])
	b.ret[i] = t.Return
	b.discount[i] = t.Discount
	b.nextBar[i] = t.NextBar
	copy(b.nextAgent[i*agentWidth:(i+1)*agentWidth], t.NextAgent[:])
	b.tree.set(i, math.Pow(b.maxPrio, b.alpha))

	b.cursor = (i + 1) % b.capacity
	b.size = min(b.size+1, b.capacity)
	return nil
}

// At returns the transition in slot i, 0 ≤ i < Len.
func (b *Buffer) At(i int) (Transition, error) {
	var t Transition
	if i < 0 || i >= b.size {
		return t, fmt.Errorf("replay at: index %d outside [0, %d): %w", i, b.size, ErrInvalid)
	}
	t.Bar = b.bar[i]
	copy(t.Agent[:], b.agent[i*agentWidth:])
	copy(t.Action[:], b.action[i*actionWidth:])
	t.Return = b.ret[i]
	t.Discount = b.discount[i]
	t.NextBar = b.nextBar[i]
	copy(t.NextAgent[:], b.nextAgent[i*agentWidth:])
	return t, nil
}

// Gather copies the transitions in slots idx into the first len(idx) rows of
// dst; rows past them are left alone. Every slice of dst must hold at least
// len(idx) rows, and every index must be in [0, Len).
func (b *Buffer) Gather(idx []int, dst *Batch) error {
	if dst == nil {
		return fmt.Errorf("replay gather: nil batch: %w", ErrInvalid)
	}
	n := len(idx)
	for _, f := range []struct {
		name      string
		have, row int
	}{
		{"Bar", len(dst.Bar), 1},
		{"Agent", len(dst.Agent), agentWidth},
		{"Action", len(dst.Action), actionWidth},
		{"Return", len(dst.Return), 1},
		{"Discount", len(dst.Discount), 1},
		{"NextBar", len(dst.NextBar), 1},
		{"NextAgent", len(dst.NextAgent), agentWidth},
	} {
		if f.have < n*f.row {
			return fmt.Errorf("replay gather: batch %s has %d values, %d indices need %d: %w", f.name, f.have, n, n*f.row, ErrInvalid)
		}
	}
	for k, i := range idx {
		if i < 0 || i >= b.size {
			return fmt.Errorf("replay gather: idx[%d] = %d outside [0, %d): %w", k, i, b.size, ErrInvalid)
		}
	}
	for k, i := range idx {
		dst.Bar[k] = b.bar[i]
		copy(dst.Agent[k*agentWidth:(k+1)*agentWidth], b.agent[i*agentWidth:])
		copy(dst.Action[k*actionWidth:(k+1)*actionWidth], b.action[i*actionWidth:])
		dst.Return[k] = b.ret[i]
		dst.Discount[k] = b.discount[i]
		dst.NextBar[k] = b.nextBar[i]
		copy(dst.NextAgent[k*agentWidth:(k+1)*agentWidth], b.nextAgent[i*agentWidth:])
	}
	return nil
}

// validateTransition checks the invariants Add and Load enforce.
func validateTransition(t *Transition) error {
	if t.Bar < 0 {
		return fmt.Errorf("bar %d is negative: %w", t.Bar, ErrInvalid)
	}
	if t.NextBar < 0 {
		return fmt.Errorf("next bar %d is negative: %w", t.NextBar, ErrInvalid)
	}
	for d, a := range t.Action {
		if a < 0 || int(a) >= market.BranchSizes[d] {
			return fmt.Errorf("action[%d] = %d outside [0, %d): %w", d, a, market.BranchSizes[d], ErrInvalid)
		}
	}
	if !finite32(t.Return) {
		return fmt.Errorf("return %v is not finite: %w", t.Return, ErrInvalid)
	}
	if !(t.Discount >= 0 && t.Discount <= 1) {
		return fmt.Errorf("discount %v outside [0, 1]: %w", t.Discount, ErrInvalid)
	}
	for j := range agentWidth {
		if !finite32(t.Agent[j]) {
			return fmt.Errorf("agent feature %d = %v is not finite: %w", j, t.Agent[j], ErrInvalid)
		}
		if !finite32(t.NextAgent[j]) {
			return fmt.Errorf("next agent feature %d = %v is not finite: %w", j, t.NextAgent[j], ErrInvalid)
		}
	}
	return nil
}

func finite32(v float32) bool {
	f := float64(v)
	return !math.IsNaN(f) && !math.IsInf(f, 0)
}
