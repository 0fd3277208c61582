package replay

import (
	"fmt"
	"math"
	"slices"

	"github.com/dqnflow/dqnflow/config"
)

// Storage is the raw state of a buffer, independent of where it lives: the
// first Size slots of every per-transition array (slot order, not age
// order; Agent and NextAgent rows of market.NumAgentFeatures values, Action
// rows of 3), the mass m_i = p_i^α of each of those slots, the slot of the
// next Add and p_max. A device-resident buffer downloads into a Storage and
// builds its checkpoint tensors with FromStorage(cfg, s) and Tensors, and
// restores with Load and Storage, so that every backend writes the same
// replay tensors.
type Storage struct {
	Bar         []int32
	Agent       []float32
	Action      []int32
	Return      []float32
	Discount    []float32
	NextBar     []int32
	NextAgent   []float32
	Mass        []float64 // p_i^α per slot
	Size        int
	Cursor      int
	MaxPriority float64
}

// Storage copies the buffer's state.
func (b *Buffer) Storage() Storage {
	n := b.size
	s := Storage{
		Bar:         slices.Clone(b.bar[:n]),
		Agent:       slices.Clone(b.agent[:n*agentWidth]),
		Action:      slices.Clone(b.action[:n*actionWidth]),
		Return:      slices.Clone(b.ret[:n]),
		Discount:    slices.Clone(b.discount[:n]),
		NextBar:     slices.Clone(b.nextBar[:n]),
		NextAgent:   slices.Clone(b.nextAgent[:n*agentWidth]),
		Mass:        make([]float64, n),
		Size:        n,
		Cursor:      b.cursor,
		MaxPriority: b.maxPrio,
	}
	for i := range s.Mass {
		s.Mass[i] = b.tree.get(i)
	}
	return s
}

// FromStorage builds a buffer with capacity, α and ε from cfg (as New) that
// holds s, and rebuilds its sum tree from s.Mass (bit-identical to the tree
// of the buffer s came from). It checks what Load checks: every slice has
// the length Size implies, 0 ≤ Size ≤ Capacity, the cursor is Size until
// the ring is full and a slot index after, p_max is finite and at least 1,
// every transition is one Add accepts and every mass is positive and
// finite. s is copied.
func FromStorage(cfg config.ReplayConfig, s Storage) (*Buffer, error) {
	empty, err := New(cfg)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name      string
		got, want int
	}{
		{"Bar", len(s.Bar), s.Size}, {"Agent", len(s.Agent), s.Size * agentWidth},
		{"Action", len(s.Action), s.Size * actionWidth}, {"Return", len(s.Return), s.Size},
		{"Discount", len(s.Discount), s.Size}, {"NextBar", len(s.NextBar), s.Size},
		{"NextAgent", len(s.NextAgent), s.Size * agentWidth}, {"Mass", len(s.Mass), s.Size},
	} {
		if s.Size >= 0 && f.got != f.want {
			return nil, fmt.Errorf("replay from storage: Storage.%s has %d values, want %d for Size %d: %w", f.name, f.got, f.want, s.Size, ErrInvalid)
		}
	}
	fields := map[string]string{TensorSize: "Size", TensorCursor: "Cursor", TensorMaxPriority: "MaxPriority", TensorMass: "Mass"}
	b, err := fromStorage(empty.capacity, empty.alpha, empty.eps, s, func(field string) string {
		if field == "slot" {
			return "Storage"
		}
		return "Storage." + fields[field]
	})
	if err != nil {
		return nil, fmt.Errorf("replay from storage: %w", err)
	}
	return b, nil
}

// fromStorage builds a buffer holding s after checking it; the slices of s
// must already have the lengths s.Size implies. name maps a tensor name
// (TensorSize, …) to the way errors refer to it, and "slot" to the prefix
// of a bad transition's error.
func fromStorage(capacity int, alpha, eps float64, s Storage, name func(field string) string) (*Buffer, error) {
	n := s.Size
	if n < 0 || n > capacity {
		return nil, fmt.Errorf("%s = %d outside [0, %d]: %w", name(TensorSize), n, capacity, ErrInvalid)
	}
	// Until the ring is full, slots fill in order, so the cursor is N.
	if s.Cursor < 0 || s.Cursor >= capacity || (n < capacity && s.Cursor != n) {
		return nil, fmt.Errorf("%s = %d is not a valid cursor for size %d and capacity %d: %w", name(TensorCursor), s.Cursor, n, capacity, ErrInvalid)
	}
	if !(s.MaxPriority >= 1) || math.IsInf(s.MaxPriority, 1) {
		return nil, fmt.Errorf("%s = %v must be finite and at least 1: %w", name(TensorMaxPriority), s.MaxPriority, ErrInvalid)
	}
	b := newBuffer(capacity, alpha, eps)
	b.size, b.cursor, b.maxPrio = n, s.Cursor, s.MaxPriority
	copy(b.bar, s.Bar)
	copy(b.agent, s.Agent)
	copy(b.action, s.Action)
	copy(b.ret, s.Return)
	copy(b.discount, s.Discount)
	copy(b.nextBar, s.NextBar)
	copy(b.nextAgent, s.NextAgent)
	for i := range n {
		t, _ := b.At(i)
		if err := validateTransition(&t); err != nil {
			return nil, fmt.Errorf("slot %d of %s: %w", i, name("slot"), err)
		}
	}
	for i, m := range s.Mass {
		if !(m > 0) || math.IsInf(m, 1) {
			return nil, fmt.Errorf("%s[%d] = %v is not positive and finite: %w", name(TensorMass), i, m, ErrInvalid)
		}
		b.tree.node[b.tree.base+i] = m
	}
	b.tree.rebuild()
	return b, nil
}
