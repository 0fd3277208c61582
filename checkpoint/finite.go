package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrNotFinite marks a NaN or an infinity in a floating-point tensor.
// dqnflow never stores one: a trainer stops at the first NaN
// (trainer.ErrNonFinite), and an export refuses a weight that would
// overflow. So Encode refuses such a value, and a file holding one was
// damaged or written by something else: Decode's error wraps ErrCorrupt
// as well, and recovery falls back to the previous good checkpoint.
var ErrNotFinite = errors.New("not finite")

// firstNonFinite returns the index of the first NaN or ±Inf among the
// elements of data, little-endian values of dtype, and its value; -1 when
// every one is finite or dtype is not a floating-point type. An IEEE value
// is non-finite exactly when its exponent bits are all ones.
func firstNonFinite(dtype DType, data []byte) (int, float64) {
	switch dtype {
	case F64:
		for i := 0; i+8 <= len(data); i += 8 {
			if u := binary.LittleEndian.Uint64(data[i:]); u&0x7ff0000000000000 == 0x7ff0000000000000 {
				return i / 8, math.Float64frombits(u)
			}
		}
	case F32:
		for i := 0; i+4 <= len(data); i += 4 {
			if u := binary.LittleEndian.Uint32(data[i:]); u&0x7f800000 == 0x7f800000 {
				return i / 4, float64(math.Float32frombits(u))
			}
		}
	case BF16:
		for i := 0; i+2 <= len(data); i += 2 {
			if u := binary.LittleEndian.Uint16(data[i:]); u&0x7f80 == 0x7f80 {
				return i / 2, float64(math.Float32frombits(uint32(u) << 16))
			}
		}
	case F16:
		for i := 0; i+2 <= len(data); i += 2 {
			if u := binary.LittleEndian.Uint16(data[i:]); u&0x7c00 == 0x7c00 {
				if u&0x03ff != 0 {
					return i / 2, math.NaN()
				}
				return i / 2, math.Inf(1 - 2*int(u>>15))
			}
		}
	}
	return -1, 0
}

// notFinite describes element i (value v) of tensor t: its flat index and,
// for a tensor of more than one dimension, its index in each.
func notFinite(t Tensor, i int, v float64) string {
	return fmt.Sprintf("tensor %q element %s is %v", t.Name, elementIndex(t.Shape, i), v)
}

// elementIndex writes flat index i of a row-major array of shape as "i"
// or, with several dimensions, "i [r, c, …]".
func elementIndex(shape []int, i int) string {
	if len(shape) < 2 {
		return strconv.Itoa(i)
	}
	idx := make([]string, len(shape))
	for d, rest := len(shape)-1, i; d >= 0; d-- {
		idx[d] = strconv.Itoa(rest % shape[d])
		rest /= shape[d]
	}
	return fmt.Sprintf("%d [%s]", i, strings.Join(idx, ", "))
}

// checkFinite refuses the first non-finite value among the tensors of a
// decoded file, naming the tensor, its first bad element and the byte
// offset; dataStart is the file offset of the data section.
func checkFinite(ctx context.Context, entries []entry, data []byte, dataStart int64) error {
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i, v := firstNonFinite(e.dtype, data[e.begin:e.end]); i >= 0 {
			pos := dataStart + e.begin + int64(i*e.dtype.Size())
			return fmt.Errorf("%w: byte %d: %s (%w): a dqnflow checkpoint holds finite values only",
				ErrCorrupt, pos, notFinite(Tensor{Name: e.name, Shape: e.shape}, i, v), ErrNotFinite)
		}
	}
	return nil
}
