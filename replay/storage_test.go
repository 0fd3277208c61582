package replay

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStorageRoundTripIsBitIdentical: a buffer rebuilt with FromStorage
// from a wrapped, reprioritised buffer's Storage has the same sum tree
// bits and checkpoint tensors, and samples the same indices and weights.
func TestStorageRoundTripIsBitIdentical(t *testing.T) {
	const batch = 16
	cfg := testConfig(32, 0.6, 1e-6)
	orig := mustNew(t, cfg)
	pcg := rand.NewPCG(7, 8)
	next := 20
	mustAdd(t, orig, 0, next)
	churn(t, orig, rand.New(pcg), 10, batch, &next) // 50 adds in 32 slots
	st := orig.Storage()
	if st.Size != 32 || st.Cursor != orig.cursor || st.MaxPriority != orig.MaxPriority() || len(st.Mass) != 32 {
		t.Fatalf("Storage: size %d cursor %d p_max %v, %d masses", st.Size, st.Cursor, st.MaxPriority, len(st.Mass))
	}
	back, err := FromStorage(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	for k := range orig.tree.node {
		if math.Float64bits(orig.tree.node[k]) != math.Float64bits(back.tree.node[k]) {
			t.Fatalf("sum tree node %d: %v, rebuilt %v", k, orig.tree.node[k], back.tree.node[k])
		}
	}
	ta, tb := orig.Tensors("r."), back.Tensors("r.")
	for i := range ta {
		if !bytes.Equal(ta[i].Data, tb[i].Data) {
			t.Fatalf("tensor %s differs", ta[i].Name)
		}
	}
	ra, rb := rand.New(pcg), rand.New(cloneRNG(t, pcg))
	ia, ib := make([]int, batch), make([]int, batch)
	wa, wb := make([]float32, batch), make([]float32, batch)
	if err := orig.Sample(ra, batch, 0.4, ia, wa); err != nil {
		t.Fatal(err)
	}
	if err := back.Sample(rb, batch, 0.4, ib, wb); err != nil {
		t.Fatal(err)
	}
	for k := range ia {
		if ia[k] != ib[k] || wa[k] != wb[k] {
			t.Fatalf("sample %d: (%d, %v) vs (%d, %v)", k, ia[k], wa[k], ib[k], wb[k])
		}
	}
	st.Bar[0], st.Mass[1] = -5, 0 // Storage is a copy
	if tr, _ := orig.At(0); tr.Bar < 0 || orig.tree.get(1) == 0 {
		t.Fatal("changing the Storage changed the buffer")
	}
}

// TestFromStorageRejectsBadStorage: each invalid field is an error
// wrapping ErrInvalid that names it.
func TestFromStorageRejectsBadStorage(t *testing.T) {
	cfg := testConfig(8, 0.6, 1e-6)
	b := mustNew(t, cfg)
	mustAdd(t, b, 0, 5)
	for _, tc := range []struct {
		want   string
		modify func(*Storage)
	}{
		{"Storage.Agent has 39 values, want 40", func(s *Storage) { s.Agent = s.Agent[1:] }},
		{"Storage.Mass has 4 values", func(s *Storage) { s.Mass = s.Mass[1:] }},
		{"Storage.Size = 9 outside [0, 8]", func(s *Storage) {
			*s = Storage{Size: 9, Cursor: 0, MaxPriority: 1, Bar: make([]int32, 9), Agent: make([]float32, 72), Action: make([]int32, 27),
				Return: make([]float32, 9), Discount: make([]float32, 9), NextBar: make([]int32, 9), NextAgent: make([]float32, 72), Mass: make([]float64, 9)}
		}},
		{"Storage.Cursor = 3 is not a valid cursor", func(s *Storage) { s.Cursor = 3 }},
		{"Storage.MaxPriority = NaN", func(s *Storage) { s.MaxPriority = math.NaN() }},
		{"Storage.Mass[2] = 0", func(s *Storage) { s.Mass[2] = 0 }},
		{"slot 1 of Storage: action[2] = 7", func(s *Storage) { s.Action[5] = 7 }},
		{"slot 4 of Storage: return", func(s *Storage) { s.Return[4] = float32(math.Inf(1)) }},
	} {
		s := b.Storage()
		tc.modify(&s)
		_, err := FromStorage(cfg, s)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromStorage error = %v, want ErrInvalid naming %q", err, tc.want)
		}
	}
	if _, err := FromStorage(testConfig(0, 0.6, 1e-6), Storage{MaxPriority: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("FromStorage with capacity 0: %v", err)
	}
	empty, err := FromStorage(cfg, Storage{MaxPriority: 1})
	if err != nil || empty.Len() != 0 || empty.Total() != 0 {
		t.Errorf("empty Storage: %v, %d transitions", err, empty.Len())
	}
}
