package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// nonFinite lists, per floating-point dtype, the little-endian bytes of a
// NaN, +Inf and -Inf.
var nonFinite = map[DType][][]byte{
	F64:  {binary.LittleEndian.AppendUint64(nil, 0x7ff8000000000001), binary.LittleEndian.AppendUint64(nil, 0x7ff0000000000000), binary.LittleEndian.AppendUint64(nil, 0xfff0000000000000)},
	F32:  {binary.LittleEndian.AppendUint32(nil, 0x7fc00000), binary.LittleEndian.AppendUint32(nil, 0x7f800000), binary.LittleEndian.AppendUint32(nil, 0xff800000)},
	BF16: {{0xc1, 0x7f}, {0x80, 0x7f}, {0x80, 0xff}},
	F16:  {{0x01, 0x7e}, {0x00, 0x7c}, {0x00, 0xfc}},
}

// TestDecodeRefusesNonFiniteValues plants a NaN, +Inf or -Inf as the last
// element of a 2×2 tensor of each floating-point dtype, in a file whose
// hashes are then recomputed, and checks that Decode refuses it with
// ErrCorrupt and ErrNotFinite, naming the tensor, the element (flat and
// per dimension) and its byte offset; the same bit patterns in integer
// tensors are plain numbers and pass.
func TestDecodeRefusesNonFiniteValues(t *testing.T) {
	for dt, bads := range nonFinite {
		for k, bad := range bads {
			w := dt.Size()
			ck := &Checkpoint{Meta: map[string]string{}, Tensors: []Tensor{
				I64Tensor("step", []int{1}, []int64{1}),
				{Name: "w", DType: dt, Shape: []int{2, 2}, Data: make([]byte, 4*w)},
			}}
			b := encodeBytes(t, ck)
			n := binary.LittleEndian.Uint64(b[:8])
			// The data section holds step (8 bytes, widest) and then w.
			pos := 8 + int(n) + 8 + 3*w
			copy(b[pos:], bad)
			_, _, err := Decode(reseal(b))
			want := fmt.Sprintf(`byte %d: tensor "w" element 3 [1, 1] is`, pos)
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrNotFinite) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s value %d: %v; want ErrCorrupt and ErrNotFinite with %q", dt, k, err, want)
			}
		}
	}
	ints := &Checkpoint{Meta: map[string]string{}, Tensors: []Tensor{
		I32Tensor("i", []int{2}, []int32{0x7f800000, -1}),
		I64Tensor("l", []int{1}, []int64{0x7ff0000000000000}),
	}}
	if _, _, err := Decode(encodeBytes(t, ints)); err != nil {
		t.Errorf("integers with a float's NaN bits: %v", err)
	}
}

// TestEncodeRefusesNonFiniteValues: a checkpoint holding a NaN or Inf in
// a floating-point tensor is not encoded (ErrNotFinite, naming the tensor
// and element; not ErrCorrupt, since nothing was read), and nothing is
// written.
func TestEncodeRefusesNonFiniteValues(t *testing.T) {
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		ck := tiny()
		ck.Tensors = append(ck.Tensors, F32Tensor("online.v2.bias", []int{3}, []float32{1, v, 2}))
		var b bytes.Buffer
		_, err := Encode(&b, ck)
		if !errors.Is(err, ErrNotFinite) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"online.v2.bias" element 1 is`) || b.Len() != 0 {
			t.Errorf("Encode with %v: %v, %d bytes written; want ErrNotFinite naming online.v2.bias element 1 and nothing written", v, err, b.Len())
		}
	}
}
