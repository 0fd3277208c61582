package replay

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/checkpoint"
)

// Tensor names, after the caller's prefix (for example "replay."). Row i of
// every per-transition tensor is slot i, for the N = Len stored slots in
// slot order (not age order); cursor says which slot is overwritten next.
const (
	TensorBar         = "bar"          // I32 [N]
	TensorAgent       = "agent"        // F32 [N, 8]
	TensorAction      = "action"       // I32 [N, 3]: direction, size, exit
	TensorReturn      = "return"       // F32 [N]
	TensorDiscount    = "discount"     // F32 [N]
	TensorNextBar     = "next_bar"     // I32 [N]
	TensorNextAgent   = "next_agent"   // F32 [N, 8]
	TensorMass        = "mass"         // F64 [N]: m_i = p_i^α, the sum tree's leaves
	TensorCapacity    = "capacity"     // I64 [1]
	TensorSize        = "size"         // I64 [1]: N
	TensorCursor      = "cursor"       // I64 [1]: slot of the next Add
	TensorMaxPriority = "max_priority" // F64 [1]: p_max ≥ 1
)

// Tensors exports the buffer's state for a checkpoint, under names
// prefix+Tensor*: the first Len slots of every per-transition array, their
// masses, and capacity, size, cursor and p_max. The tensors own their data.
func (b *Buffer) Tensors(prefix string) []checkpoint.Tensor {
	n := b.size
	masses := make([]float64, n)
	for i := range masses {
		masses[i] = b.tree.get(i)
	}
	return []checkpoint.Tensor{
		{Name: prefix + TensorBar, DType: checkpoint.I32, Shape: []int{n}, Data: encodeI32(b.bar[:n])},
		{Name: prefix + TensorAgent, DType: checkpoint.F32, Shape: []int{n, agentWidth}, Data: encodeF32(b.agent[:n*agentWidth])},
		{Name: prefix + TensorAction, DType: checkpoint.I32, Shape: []int{n, actionWidth}, Data: encodeI32(b.action[:n*actionWidth])},
		{Name: prefix + TensorReturn, DType: checkpoint.F32, Shape: []int{n}, Data: encodeF32(b.ret[:n])},
		{Name: prefix + TensorDiscount, DType: checkpoint.F32, Shape: []int{n}, Data: encodeF32(b.discount[:n])},
		{Name: prefix + TensorNextBar, DType: checkpoint.I32, Shape: []int{n}, Data: encodeI32(b.nextBar[:n])},
		{Name: prefix + TensorNextAgent, DType: checkpoint.F32, Shape: []int{n, agentWidth}, Data: encodeF32(b.nextAgent[:n*agentWidth])},
		{Name: prefix + TensorMass, DType: checkpoint.F64, Shape: []int{n}, Data: encodeF64(masses)},
		{Name: prefix + TensorCapacity, DType: checkpoint.I64, Shape: []int{1}, Data: encodeI64(int64(b.capacity))},
		{Name: prefix + TensorSize, DType: checkpoint.I64, Shape: []int{1}, Data: encodeI64(int64(n))},
		{Name: prefix + TensorCursor, DType: checkpoint.I64, Shape: []int{1}, Data: encodeI64(int64(b.cursor))},
		{Name: prefix + TensorMaxPriority, DType: checkpoint.F64, Shape: []int{1}, Data: encodeF64([]float64{b.maxPrio})},
	}
}

// Load replaces the buffer's state with the tensors prefix+Tensor* of ck,
// written by Tensors of a buffer with the same capacity, and rebuilds the
// sum tree from the masses (bit-identical to the saved tree, see sumTree).
// It checks every tensor's presence, dtype, shape and byte length, the
// scalars' ranges, every transition (as Add does) and every mass (finite
// and positive); an error names the tensor, and on error the buffer is left
// unchanged. α and ε are the buffer's own, from New.
func (b *Buffer) Load(ck *checkpoint.Checkpoint, prefix string) error {
	if ck == nil {
		return fmt.Errorf("load replay: nil checkpoint: %w", ErrInvalid)
	}
	r := tensorReader{ck: ck, prefix: prefix}

	capacity, err := r.scalarInt(TensorCapacity)
	if err != nil {
		return err
	}
	if capacity != int64(b.capacity) {
		return fmt.Errorf("load replay: tensor %s%s = %d, this buffer's capacity is %d: %w", prefix, TensorCapacity, capacity, b.capacity, ErrInvalid)
	}
	size64, err := r.scalarInt(TensorSize)
	if err != nil {
		return err
	}
	if size64 < 0 || size64 > capacity {
		return fmt.Errorf("load replay: tensor %s%s = %d outside [0, %d]: %w", prefix, TensorSize, size64, capacity, ErrInvalid)
	}
	n := int(size64)
	cursor, err := r.scalarInt(TensorCursor)
	if err != nil {
		return err
	}
	maxPrioT, err := r.raw(TensorMaxPriority, checkpoint.F64, 1)
	if err != nil {
		return err
	}
	st := Storage{Size: n, Cursor: int(cursor), MaxPriority: decodeF64(maxPrioT.Data)[0]}
	for _, f := range []struct {
		name  string
		dtype checkpoint.DType
		width int
		dst   any
	}{
		{TensorBar, checkpoint.I32, 1, &st.Bar},
		{TensorAgent, checkpoint.F32, agentWidth, &st.Agent},
		{TensorAction, checkpoint.I32, actionWidth, &st.Action},
		{TensorReturn, checkpoint.F32, 1, &st.Return},
		{TensorDiscount, checkpoint.F32, 1, &st.Discount},
		{TensorNextBar, checkpoint.I32, 1, &st.NextBar},
		{TensorNextAgent, checkpoint.F32, agentWidth, &st.NextAgent},
		{TensorMass, checkpoint.F64, 1, &st.Mass},
	} {
		t, err := r.raw(f.name, f.dtype, n, f.width)
		if err != nil {
			return err
		}
		switch dst := f.dst.(type) {
		case *[]int32:
			*dst = make([]int32, n*f.width)
			decodeI32Into(*dst, t.Data)
		case *[]float32:
			*dst = make([]float32, n*f.width)
			decodeF32Into(*dst, t.Data)
		case *[]float64:
			*dst = decodeF64(t.Data)
		}
	}
	next, err := fromStorage(b.capacity, b.alpha, b.eps, st, func(field string) string {
		if field == "slot" {
			return "tensors " + prefix + "*"
		}
		return "tensor " + prefix + field
	})
	if err != nil {
		return fmt.Errorf("load replay: %w", err)
	}
	*b = *next
	return nil
}

// tensorReader finds and checks the tensors of one prefix in a checkpoint.
type tensorReader struct {
	ck     *checkpoint.Checkpoint
	prefix string
}

// raw returns the tensor prefix+name after checking that it occurs once,
// has dtype dtype, shape shape and the matching byte length. A shape of
// [n, 1] is written [n], so trailing 1s of shape are dropped.
func (r tensorReader) raw(name string, dtype checkpoint.DType, shape ...int) (*checkpoint.Tensor, error) {
	full := r.prefix + name
	if len(shape) == 2 && shape[1] == 1 {
		shape = shape[:1]
	}
	var found *checkpoint.Tensor
	for i := range r.ck.Tensors {
		if r.ck.Tensors[i].Name != full {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("load replay: tensor %s occurs more than once: %w", full, ErrInvalid)
		}
		found = &r.ck.Tensors[i]
	}
	if found == nil {
		return nil, fmt.Errorf("load replay: tensor %s is missing: %w", full, ErrInvalid)
	}
	if found.DType != dtype {
		return nil, fmt.Errorf("load replay: tensor %s has dtype %s, want %s: %w", full, found.DType, dtype, ErrInvalid)
	}
	if !equalShape(found.Shape, shape) {
		return nil, fmt.Errorf("load replay: tensor %s has shape %v, want %v: %w", full, found.Shape, shape, ErrInvalid)
	}
	want := dtype.Size()
	for _, d := range shape {
		want *= d
	}
	if len(found.Data) != want {
		return nil, fmt.Errorf("load replay: tensor %s has %d bytes, shape %v of %s needs %d: %w", full, len(found.Data), shape, dtype, want, ErrInvalid)
	}
	return found, nil
}

// scalarInt reads the I64 [1] tensor prefix+name.
func (r tensorReader) scalarInt(name string) (int64, error) {
	t, err := r.raw(name, checkpoint.I64, 1)
	if err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(t.Data)), nil
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Little-endian encoders and decoders of the checkpoint tensors' data.

func encodeI32(v []int32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
	}
	return out
}

func encodeF32(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func encodeF64(v []float64) []byte {
	out := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(x))
	}
	return out
}

func encodeI64(x int64) []byte {
	return binary.LittleEndian.AppendUint64(nil, uint64(x))
}

// decodeI32Into and decodeF32Into fill dst[:len(src)/4]; the caller checked
// that src has exactly that many values and that dst has room.
func decodeI32Into(dst []int32, src []byte) {
	for i := range len(src) / 4 {
		dst[i] = int32(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func decodeF32Into(dst []float32, src []byte) {
	for i := range len(src) / 4 {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func decodeF64(src []byte) []float64 {
	out := make([]float64, len(src)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:]))
	}
	return out
}
