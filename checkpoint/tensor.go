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
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{Name: name, DType: F32, Shape: slices.Clone(shape), Data: b}
}

// F64Tensor encodes v little-endian as an F64 tensor (see F32Tensor).
func F64Tensor(name string, shape []int, v []float64) Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return Tensor{Name: name, DType: F64, Shape: slices.Clone(shape), Data: b}
}

// I64Tensor encodes v little-endian as an I64 tensor (see F32Tensor).
func I64Tensor(name string, shape []int, v []int64) Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return Tensor{Name: name, DType: I64, Shape: slices.Clone(shape), Data: b}
}

// I32Tensor encodes v little-endian as an I32 tensor (see F32Tensor).
func I32Tensor(name string, shape []int, v []int32) Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return Tensor{Name: name, DType: I32, Shape: slices.Clone(shape), Data: b}
}

// U8Tensor copies v into a U8 tensor (see F32Tensor).
func U8Tensor(name string, shape []int, v []byte) Tensor {
	return Tensor{Name: name, DType: U8, Shape: slices.Clone(shape), Data: slices.Clone(v)}
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
	b, err := ck.raw(name, F32, shape)
	if err != nil {
		return nil, err
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// F64 decodes the F64 tensor called name (see F32).
func (ck *Checkpoint) F64(name string, shape ...int) ([]float64, error) {
	b, err := ck.raw(name, F64, shape)
	if err != nil {
		return nil, err
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v, nil
}

// I64 decodes the I64 tensor called name (see F32).
func (ck *Checkpoint) I64(name string, shape ...int) ([]int64, error) {
	b, err := ck.raw(name, I64, shape)
	if err != nil {
		return nil, err
	}
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v, nil
}

// I32 decodes the I32 tensor called name (see F32).
func (ck *Checkpoint) I32(name string, shape ...int) ([]int32, error) {
	b, err := ck.raw(name, I32, shape)
	if err != nil {
		return nil, err
	}
	v := make([]int32, len(b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
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
