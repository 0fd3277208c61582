package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrMissingTensor marks a tensor name that a checkpoint does not hold.
var ErrMissingTensor = errors.New("tensor not in checkpoint")

// ErrTensorMismatch marks a tensor whose dtype, shape or byte length is not
// what the reader expects.
var ErrTensorMismatch = errors.New("tensor does not match")

// F32Tensor encodes v little-endian as an F32 tensor. The shape is copied;
// Encode rejects a shape whose product is not len(v).
func F32Tensor(name string, shape []int, v []float32) Tensor {
	return encodeTensor(name, F32, shape, v, func(b []byte, x float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(x)) })
}

// F64Tensor encodes v little-endian as an F64 tensor (see F32Tensor).
func F64Tensor(name string, shape []int, v []float64) Tensor {
	return encodeTensor(name, F64, shape, v, func(b []byte, x float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(x)) })
}

// I64Tensor encodes v little-endian as an I64 tensor (see F32Tensor).
func I64Tensor(name string, shape []int, v []int64) Tensor {
	return encodeTensor(name, I64, shape, v, func(b []byte, x int64) { binary.LittleEndian.PutUint64(b, uint64(x)) })
}

// I32Tensor encodes v little-endian as an I32 tensor (see F32Tensor).
func I32Tensor(name string, shape []int, v []int32) Tensor {
	return encodeTensor(name, I32, shape, v, func(b []byte, x int32) { binary.LittleEndian.PutUint32(b, uint32(x)) })
}

// U8Tensor copies v into a U8 tensor (see F32Tensor).
func U8Tensor(name string, shape []int, v []byte) Tensor {
	return Tensor{Name: name, DType: U8, Shape: slices.Clone(shape), Data: slices.Clone(v)}
}

// encodeTensor encodes v as a tensor of dtype, put writing one value
// little-endian into the dtype's Size bytes it is given.
func encodeTensor[T any](name string, dtype DType, shape []int, v []T, put func([]byte, T)) Tensor {
	size := dtype.Size()
	b := make([]byte, size*len(v))
	for i, x := range v {
		put(b[size*i:], x)
	}
	return Tensor{Name: name, DType: dtype, Shape: slices.Clone(shape), Data: b}
}

// decodeTensor decodes the tensor called name, of dtype and shape (see
// raw), get reading one value from its dtype's Size bytes, little-endian.
func decodeTensor[T any](ck *Checkpoint, name string, dtype DType, shape []int, get func([]byte) T) ([]T, error) {
	b, err := ck.raw(name, dtype, shape)
	if err != nil {
		return nil, err
	}
	size := dtype.Size()
	v := make([]T, len(b)/size)
	for i := range v {
		v[i] = get(b[size*i:])
	}
	return v, nil
}

// Find returns the tensor called name.
func (ck *Checkpoint) Find(name string) (Tensor, bool) {
	if ck == nil {
		return Tensor{}, false
	}
	for _, t := range ck.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// F32 decodes the F32 tensor called name, which must have exactly the given
// shape (none for a scalar). The error names the tensor and wraps
// ErrMissingTensor or ErrTensorMismatch.
func (ck *Checkpoint) F32(name string, shape ...int) ([]float32, error) {
	return decodeTensor(ck, name, F32, shape, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
}

// F64 decodes the F64 tensor called name (see F32).
func (ck *Checkpoint) F64(name string, shape ...int) ([]float64, error) {
	return decodeTensor(ck, name, F64, shape, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
}

// I64 decodes the I64 tensor called name (see F32).
func (ck *Checkpoint) I64(name string, shape ...int) ([]int64, error) {
	return decodeTensor(ck, name, I64, shape, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
}

// I32 decodes the I32 tensor called name (see F32).
func (ck *Checkpoint) I32(name string, shape ...int) ([]int32, error) {
	return decodeTensor(ck, name, I32, shape, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
}

// U8 returns a copy of the U8 tensor called name (see F32).
func (ck *Checkpoint) U8(name string, shape ...int) ([]byte, error) {
	b, err := ck.raw(name, U8, shape)
	if err != nil {
		return nil, err
	}
	return slices.Clone(b), nil
}

// raw returns the data of the tensor called name after checking its dtype,
// its shape against shape and its byte length against both.
func (ck *Checkpoint) raw(name string, dtype DType, shape []int) ([]byte, error) {
	t, ok := ck.Find(name)
	if !ok {
		return nil, fmt.Errorf("tensor %q: %w", name, ErrMissingTensor)
	}
	if t.DType != dtype || !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("tensor %q is %s %v, want %s %v: %w", name, t.DType, t.Shape, dtype, shape, ErrTensorMismatch)
	}
	if err := checkLayout(t); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrTensorMismatch)
	}
	return t.Data, nil
}
