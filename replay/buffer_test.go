package replay

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
)

func testConfig(capacity int, alpha, eps float64) config.ReplayConfig {
	return config.ReplayConfig{Capacity: capacity, Alpha: alpha, Beta0: 0.4, BetaSteps: 100, PriorityEps: eps, Warmup: 1}
}

func mustNew(t testing.TB, cfg config.ReplayConfig) *Buffer {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// transition returns a valid transition whose every field is derived from
// k, so a slot's content says which Add wrote it.
func transition(k int) Transition {
	tr := Transition{
		Bar:      int32(k),
		Action:   [3]int32{int32(k % 3), int32(k % 4), int32((k + 1) % 3)},
		Return:   float32(k)*0.5 - 3,
		Discount: float32(0.97 * float64(k%2)),
		NextBar:  int32(k + 3),
	}
	for j := range tr.Agent {
		tr.Agent[j] = float32(k*10 + j)
		tr.NextAgent[j] = -float32(k*10 + j)
	}
	return tr
}

func mustAdd(t testing.TB, b *Buffer, from, to int) {
	t.Helper()
	for k := from; k < to; k++ {
		if err := b.Add(transition(k)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config.ReplayConfig
		want string
	}{
		{"zero capacity", testConfig(0, 0.6, 1e-6), "capacity 0"},
		{"huge capacity", testConfig(MaxCapacity+1, 0.6, 1e-6), "capacity"},
		{"negative alpha", testConfig(10, -0.1, 1e-6), "alpha -0.1"},
		{"alpha above 1", testConfig(10, 1.5, 1e-6), "alpha 1.5"},
		{"NaN alpha", testConfig(10, math.NaN(), 1e-6), "alpha NaN"},
		{"zero eps", testConfig(10, 0.6, 0), "priority_eps 0"},
		{"infinite eps", testConfig(10, 0.6, math.Inf(1)), "priority_eps +Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) error = %v, want ErrInvalid naming %q", tc.cfg, err, tc.want)
			}
		})
	}
}

func TestAddOverwritesOldestInRingOrder(t *testing.T) {
	const capacity = 5
	b := mustNew(t, testConfig(capacity, 0.6, 1e-6))
	for k := range 13 {
		mustAdd(t, b, k, k+1)
		if want := min(k+1, capacity); b.Len() != want {
			t.Fatalf("after %d adds Len = %d, want %d", k+1, b.Len(), want)
		}
	}
	// 13 adds into 5 slots: slot s holds the last k ≡ s (mod 5), k < 13.
	for s, k := range []int{10, 11, 12, 8, 9} {
		got, err := b.At(s)
		if err != nil {
			t.Fatal(err)
		}
		if got != transition(k) {
			t.Fatalf("slot %d holds %+v, want transition %d", s, got, k)
		}
	}
	if b.cursor != 13%capacity {
		t.Fatalf("cursor = %d, want %d", b.cursor, 13%capacity)
	}
}

func TestAddRejectsBadTransition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Transition)
		want   string
	}{
		{"negative bar", func(tr *Transition) { tr.Bar = -1 }, "bar -1"},
		{"negative next bar", func(tr *Transition) { tr.NextBar = -2 }, "next bar -2"},
		{"direction out of range", func(tr *Transition) { tr.Action[0] = 3 }, "action[0] = 3"},
		{"size out of range", func(tr *Transition) { tr.Action[1] = 4 }, "action[1] = 4"},
		{"negative exit", func(tr *Transition) { tr.Action[2] = -1 }, "action[2] = -1"},
		{"NaN return", func(tr *Transition) { tr.Return = float32(math.NaN()) }, "return NaN"},
		{"discount above 1", func(tr *Transition) { tr.Discount = 1.5 }, "discount 1.5"},
		{"NaN discount", func(tr *Transition) { tr.Discount = float32(math.NaN()) }, "discount NaN"},
		{"infinite agent feature", func(tr *Transition) { tr.Agent[4] = float32(math.Inf(1)) }, "agent feature 4"},
		{"NaN next agent feature", func(tr *Transition) { tr.NextAgent[7] = float32(math.NaN()) }, "next agent feature 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustNew(t, testConfig(4, 0.6, 1e-6))
			tr := transition(1)
			tc.modify(&tr)
			err := b.Add(tr)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Add error = %v, want ErrInvalid naming %q", err, tc.want)
			}
			if b.Len() != 0 || b.Total() != 0 {
				t.Fatalf("rejected Add changed the buffer: Len %d, Total %v", b.Len(), b.Total())
			}
		})
	}
}

// TestNewTransitionsGetMaxPriority checks Algorithm 1, line 6: a new
// transition's mass is p_max^α, p_max the largest priority ever set (1
// before any update), and p_max does not fall when that priority is lowered.
func TestNewTransitionsGetMaxPriority(t *testing.T) {
	const alpha, eps = 0.6, 0.01
	b := mustNew(t, testConfig(8, alpha, eps))
	mustAdd(t, b, 0, 3)
	for i := range 3 {
		if m := b.tree.get(i); m != 1 {
			t.Fatalf("mass of slot %d before any update = %v, want 1^α = 1", i, m)
		}
	}
	if err := b.UpdatePriorities([]int{1, 2}, []float32{3, 0.5}); err != nil {
		t.Fatal(err)
	}
	pMax := float64(float32(3)) + eps // 3.01
	if b.MaxPriority() != pMax {
		t.Fatalf("MaxPriority = %v, want %v", b.MaxPriority(), pMax)
	}
	mustAdd(t, b, 3, 4)
	want := math.Pow(3.01, alpha)
	if m := b.tree.get(3); math.Abs(m-want) > 1e-15*want {
		t.Fatalf("mass of new slot 3 = %v, want 3.01^0.6 = %v", m, want)
	}
	// Lowering the priority that set p_max leaves p_max alone.
	if err := b.UpdatePriorities([]int{1}, []float32{0.1}); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, b, 4, 5)
	if m := b.tree.get(4); math.Abs(m-want) > 1e-15*want {
		t.Fatalf("mass of new slot 4 after lowering the maximum = %v, want still %v", m, want)
	}
	if m, w := b.tree.get(1), math.Pow(float64(float32(0.1))+eps, alpha); m != w {
		t.Fatalf("mass of updated slot 1 = %v, want (0.1+ε)^α = %v", m, w)
	}
}

func TestGatherCopiesSelectedTransitions(t *testing.T) {
	b := mustNew(t, testConfig(10, 0.6, 1e-6))
	mustAdd(t, b, 0, 7)
	idx := []int{6, 0, 3, 3}
	dst := NewBatch(5)
	dst.Bar[4] = -99 // past len(idx): must stay untouched
	if err := b.Gather(idx, dst); err != nil {
		t.Fatal(err)
	}
	for r, i := range idx {
		want := transition(i)
		var got Transition
		got.Bar, got.Return, got.Discount, got.NextBar = dst.Bar[r], dst.Return[r], dst.Discount[r], dst.NextBar[r]
		copy(got.Agent[:], dst.Agent[r*8:(r+1)*8])
		copy(got.Action[:], dst.Action[r*3:(r+1)*3])
		copy(got.NextAgent[:], dst.NextAgent[r*8:(r+1)*8])
		if got != want {
			t.Fatalf("row %d = %+v, want transition %d = %+v", r, got, i, want)
		}
	}
	if dst.Bar[4] != -99 {
		t.Fatalf("row 4 was overwritten: Bar = %d", dst.Bar[4])
	}
}

func TestGatherRejectsBadInput(t *testing.T) {
	b := mustNew(t, testConfig(10, 0.6, 1e-6))
	mustAdd(t, b, 0, 3)
	short := NewBatch(2)
	short.NextAgent = short.NextAgent[:15]
	for _, tc := range []struct {
		name string
		idx  []int
		dst  *Batch
		want string
	}{
		{"nil batch", []int{0}, nil, "nil batch"},
		{"batch too small", []int{0, 1, 2}, NewBatch(2), "Bar has 2 values"},
		{"one short slice", []int{0, 1}, short, "NextAgent has 15 values"},
		{"index past size", []int{0, 3}, NewBatch(2), "idx[1] = 3 outside [0, 3)"},
		{"negative index", []int{-1}, NewBatch(2), "idx[0] = -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.Gather(tc.idx, tc.dst)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Gather error = %v, want ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}
