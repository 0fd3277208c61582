package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
)

// cloneRNG returns a PCG with the same state as src, through the binary
// form a trainer checkpoints.
func cloneRNG(t *testing.T, src *rand.PCG) *rand.PCG {
	t.Helper()
	state, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dst := rand.NewPCG(0, 0)
	if err := dst.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	return dst
}

// churn runs rounds of sample, update and add, the trainer's loop.
func churn(t *testing.T, b *Buffer, rng *rand.Rand, rounds, batch int, next *int) {
	t.Helper()
	idx := make([]int, batch)
	w := make([]float32, batch)
	loss := make([]float32, batch)
	for range rounds {
		if err := b.Sample(rng, batch, 0.5, idx, w); err != nil {
			t.Fatal(err)
		}
		for k := range loss {
			loss[k] = float32(rng.ExpFloat64())
		}
		if err := b.UpdatePriorities(idx, loss); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, b, *next, *next+3)
		*next += 3
	}
}

func TestResumeIsBitIdentical(t *testing.T) {
	const batch = 32
	cfg := testConfig(64, 0.6, 1e-6)
	orig := mustNew(t, cfg)
	pcg := rand.NewPCG(42, 43)
	rng := rand.New(pcg)
	next := 0
	mustAdd(t, orig, 0, 40)
	next = 40
	churn(t, orig, rng, 20, batch, &next) // 100 adds in 64 slots: the ring has wrapped

	ck := &checkpoint.Checkpoint{Tensors: orig.Tensors("replay.")}
	restored := mustNew(t, cfg)
	mustAdd(t, restored, 0, 5) // state that Load must replace
	if err := restored.Load(ck, "replay."); err != nil {
		t.Fatal(err)
	}
	for k := range orig.tree.node {
		if math.Float64bits(orig.tree.node[k]) != math.Float64bits(restored.tree.node[k]) {
			t.Fatalf("sum tree node %d: saved %v, rebuilt %v", k, orig.tree.node[k], restored.tree.node[k])
		}
	}
	again := restored.Tensors("replay.")
	for i, tt := range ck.Tensors {
		if tt.Name != again[i].Name || !slices.Equal(tt.Shape, again[i].Shape) || !bytes.Equal(tt.Data, again[i].Data) {
			t.Fatalf("tensor %s differs after a save/load round trip", tt.Name)
		}
	}

	rngA := rand.New(pcg)
	rngB := rand.New(cloneRNG(t, pcg))
	nextA, nextB := next, next
	idxA, idxB := make([]int, batch), make([]int, batch)
	wA, wB := make([]float32, batch), make([]float32, batch)
	for round := range 30 {
		if err := orig.Sample(rngA, batch, 0.7, idxA, wA); err != nil {
			t.Fatal(err)
		}
		if err := restored.Sample(rngB, batch, 0.7, idxB, wB); err != nil {
			t.Fatal(err)
		}
		for k := range batch {
			if idxA[k] != idxB[k] || math.Float32bits(wA[k]) != math.Float32bits(wB[k]) {
				t.Fatalf("round %d, sample %d: original (%d, %v), restored (%d, %v)", round, k, idxA[k], wA[k], idxB[k], wB[k])
			}
		}
		churn(t, orig, rngA, 1, batch, &nextA)
		churn(t, restored, rngB, 1, batch, &nextB)
	}
}

func TestTensorsLayout(t *testing.T) {
	b := mustNew(t, testConfig(6, 1, 0.5))
	mustAdd(t, b, 0, 8) // slots 0, 1 overwritten by transitions 6, 7
	if err := b.UpdatePriorities([]int{4}, []float32{2.5}); err != nil {
		t.Fatal(err)
	}
	ts := b.Tensors("r/")
	want := []struct {
		name  string
		dtype checkpoint.DType
		shape []int
	}{
		{"r/bar", checkpoint.I32, []int{6}},
		{"r/agent", checkpoint.F32, []int{6, 8}},
		{"r/action", checkpoint.I32, []int{6, 3}},
		{"r/return", checkpoint.F32, []int{6}},
		{"r/discount", checkpoint.F32, []int{6}},
		{"r/next_bar", checkpoint.I32, []int{6}},
		{"r/next_agent", checkpoint.F32, []int{6, 8}},
		{"r/mass", checkpoint.F64, []int{6}},
		{"r/capacity", checkpoint.I64, []int{1}},
		{"r/size", checkpoint.I64, []int{1}},
		{"r/cursor", checkpoint.I64, []int{1}},
		{"r/max_priority", checkpoint.F64, []int{1}},
	}
	if len(ts) != len(want) {
		t.Fatalf("%d tensors, want %d", len(ts), len(want))
	}
	for i, w := range want {
		if ts[i].Name != w.name || ts[i].DType != w.dtype || !slices.Equal(ts[i].Shape, w.shape) {
			t.Fatalf("tensor %d = %s %s %v, want %s %s %v", i, ts[i].Name, ts[i].DType, ts[i].Shape, w.name, w.dtype, w.shape)
		}
	}
	le := binary.LittleEndian
	for s, k := range []int{6, 7, 2, 3, 4, 5} {
		if got := int32(le.Uint32(ts[0].Data[4*s:])); got != int32(k) {
			t.Fatalf("bar[%d] = %d, want %d (slot order)", s, got, k)
		}
	}
	if got := math.Float32frombits(le.Uint32(ts[1].Data[4*(8*2+5):])); got != 25 { // agent of slot 2 = transition 2, feature 5
		t.Fatalf("agent[2][5] = %v, want 25", got)
	}
	if got := math.Float64frombits(le.Uint64(ts[7].Data[8*4:])); got != 3 { // (2.5 + 0.5)^1
		t.Fatalf("mass[4] = %v, want 3", got)
	}
	for i, w := range []int64{6, 6, 2} {
		if got := int64(le.Uint64(ts[8+i].Data)); got != w {
			t.Fatalf("%s = %d, want %d", ts[8+i].Name, got, w)
		}
	}
	if got := math.Float64frombits(le.Uint64(ts[11].Data)); got != 3 {
		t.Fatalf("max_priority = %v, want 3", got)
	}
}

func TestLoadRejectsBadTensorsAndKeepsState(t *testing.T) {
	cfg := testConfig(8, 0.6, 1e-6)
	src := mustNew(t, cfg)
	mustAdd(t, src, 0, 5)
	good := src.Tensors("replay.")
	find := func(ts []checkpoint.Tensor, name string) *checkpoint.Tensor {
		for i := range ts {
			if ts[i].Name == "replay."+name {
				return &ts[i]
			}
		}
		t.Fatalf("no tensor %s", name)
		return nil
	}
	for _, tc := range []struct {
		name   string
		modify func([]checkpoint.Tensor) []checkpoint.Tensor
		want   string
	}{
		{"missing tensor", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			return slices.DeleteFunc(ts, func(x checkpoint.Tensor) bool { return x.Name == "replay.mass" })
		}, "tensor replay.mass is missing"},
		{"duplicate tensor", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			return append(ts, *find(ts, "bar"))
		}, "tensor replay.bar occurs more than once"},
		{"wrong dtype", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			find(ts, "return").DType = checkpoint.F64
			return ts
		}, "tensor replay.return has dtype F64, want F32"},
		{"wrong shape", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			find(ts, "agent").Shape = []int{5, 7}
			return ts
		}, "tensor replay.agent has shape [5 7], want [5 8]"},
		{"truncated data", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			tt := find(ts, "next_bar")
			tt.Data = tt.Data[:len(tt.Data)-1]
			return ts
		}, "tensor replay.next_bar has 19 bytes"},
		{"other capacity", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			find(ts, "capacity").Data = encodeI64(16)
			return ts
		}, "tensor replay.capacity = 16"},
		{"size past capacity", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			find(ts, "size").Data = encodeI64(9)
			return ts
		}, "tensor replay.size = 9 outside [0, 8]"},
		{"cursor inconsistent with size", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			find(ts, "cursor").Data = encodeI64(2)
			return ts
		}, "tensor replay.cursor = 2"},
		{"NaN max priority", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			find(ts, "max_priority").Data = encodeF64([]float64{math.NaN()})
			return ts
		}, "tensor replay.max_priority = NaN"},
		{"zero mass", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			find(ts, "mass").Data = encodeF64([]float64{1, 1, 0, 1, 1})
			return ts
		}, "tensor replay.mass[2] = 0"},
		{"action out of range", func(ts []checkpoint.Tensor) []checkpoint.Tensor {
			find(ts, "action").Data = encodeI32([]int32{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0})
			return ts
		}, "slot 2 of tensors replay.*: action[1] = 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := make([]checkpoint.Tensor, len(good))
			copy(ts, good) // headers copied; modify replaces Data/Shape, never writes into them
			ck := &checkpoint.Checkpoint{Tensors: tc.modify(ts)}
			dst := mustNew(t, cfg)
			mustAdd(t, dst, 100, 103)
			before := dst.Tensors("x.")
			err := dst.Load(ck, "replay.")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error = %v, want ErrInvalid naming %q", err, tc.want)
			}
			after := dst.Tensors("x.")
			for i := range before {
				if !bytes.Equal(before[i].Data, after[i].Data) {
					t.Fatalf("failed Load changed %s", before[i].Name)
				}
			}
		})
	}
	if err := mustNew(t, cfg).Load(nil, "replay."); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load(nil) error = %v, want ErrInvalid", err)
	}
}

func TestEmptyBufferRoundTrips(t *testing.T) {
	cfg := testConfig(4, 0.6, 1e-6)
	ck := &checkpoint.Checkpoint{Tensors: mustNew(t, cfg).Tensors("")}
	b := mustNew(t, cfg)
	mustAdd(t, b, 0, 2)
	if err := b.Load(ck, ""); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 0 || b.Total() != 0 || b.cursor != 0 || b.MaxPriority() != 1 {
		t.Fatalf("after loading an empty buffer: Len %d, Total %v, cursor %d, MaxPriority %v", b.Len(), b.Total(), b.cursor, b.MaxPriority())
	}
}
