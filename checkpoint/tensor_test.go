package checkpoint

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestConstructorsAreLittleEndian checks the bytes of each constructor
// against hand-written little-endian encodings.
func TestConstructorsAreLittleEndian(t *testing.T) {
	cases := []struct {
		t    Tensor
		want []byte
	}{
		{F32Tensor("f", []int{2}, []float32{1, -2}), []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}},
		{F64Tensor("d", []int{1}, []float64{1}), []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
		{I64Tensor("l", []int{1}, []int64{-2}), []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{I32Tensor("i", []int{2}, []int32{0x01020304, -1}), []byte{4, 3, 2, 1, 0xff, 0xff, 0xff, 0xff}},
		{U8Tensor("u", []int{2}, []byte{9, 8}), []byte{9, 8}},
	}
	for _, c := range cases {
		if !bytes.Equal(c.t.Data, c.want) {
			t.Errorf("%s (%s): data %x, want %x", c.t.Name, c.t.DType, c.t.Data, c.want)
		}
	}
}

// TestAccessorsInvertConstructors checks that every accessor returns the
// values its constructor encoded, bit for bit (NaN payloads, -0, extremes).
func TestAccessorsInvertConstructors(t *testing.T) {
	f32 := []float32{0, float32(math.Copysign(0, -1)), math.MaxFloat32, math.SmallestNonzeroFloat32, math.Float32frombits(0x7fa00001), float32(math.Inf(1))}
	f64 := []float64{math.Pi, -math.MaxFloat64, math.Float64frombits(0x7ff0000000000001)}
	i64 := []int64{math.MinInt64, -1, 0, math.MaxInt64}
	i32 := []int32{math.MinInt32, -1, math.MaxInt32}
	u8 := []byte{0, 127, 255}
	shape := []int{2, 3}
	ck := &Checkpoint{Tensors: []Tensor{
		F32Tensor("f32", shape, f32),
		F64Tensor("f64", []int{3}, f64),
		I64Tensor("i64", []int{4, 1}, i64),
		I32Tensor("i32", []int{3}, i32),
		U8Tensor("u8", []int{3}, u8),
		I64Tensor("step", nil, []int64{12}),
	}}
	shape[0] = 99 // the constructor copied the shape
	gotF32, err := ck.F32("f32", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f32 {
		if math.Float32bits(gotF32[i]) != math.Float32bits(f32[i]) {
			t.Errorf("f32[%d] = %#x, want %#x", i, math.Float32bits(gotF32[i]), math.Float32bits(f32[i]))
		}
	}
	gotF64, err := ck.F64("f64", 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f64 {
		if math.Float64bits(gotF64[i]) != math.Float64bits(f64[i]) {
			t.Errorf("f64[%d] = %v, want %v", i, gotF64[i], f64[i])
		}
	}
	if got, err := ck.I64("i64", 4, 1); err != nil || !reflect.DeepEqual(got, i64) {
		t.Errorf("I64 = %v, %v; want %v", got, err, i64)
	}
	if got, err := ck.I32("i32", 3); err != nil || !reflect.DeepEqual(got, i32) {
		t.Errorf("I32 = %v, %v; want %v", got, err, i32)
	}
	got, err := ck.U8("u8", 3)
	if err != nil || !bytes.Equal(got, u8) {
		t.Errorf("U8 = %v, %v; want %v", got, err, u8)
	}
	got[0] = 1 // U8 returns a copy
	if again, _ := ck.U8("u8", 3); again[0] != 0 {
		t.Error("U8 returned the checkpoint's own bytes")
	}
	if got, err := ck.I64("step"); err != nil || !reflect.DeepEqual(got, []int64{12}) {
		t.Errorf("scalar step = %v, %v; want [12]", got, err)
	}
	if _, ok := ck.Find("f64"); !ok {
		t.Error("Find(f64) = false")
	}
	if _, ok := (*Checkpoint)(nil).Find("f64"); ok {
		t.Error("Find on a nil checkpoint = true")
	}
}

// TestAccessorsNameTheTensorOnMismatch checks every way a lookup can fail:
// each error names the tensor and wraps the right sentinel, and none panics.
func TestAccessorsNameTheTensorOnMismatch(t *testing.T) {
	ck := &Checkpoint{Tensors: []Tensor{
		F32Tensor("w", []int{2, 3}, make([]float32, 6)),
		F32Tensor("broken", []int{4}, make([]float32, 3)),
		I64Tensor("step", nil, []int64{1}),
	}}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"nope", func() error { _, err := ck.F32("nope", 1); return err }, ErrMissingTensor},
		{"w", func() error { _, err := ck.I32("w", 2, 3); return err }, ErrTensorMismatch},
		{"w", func() error { _, err := ck.F32("w", 3, 2); return err }, ErrTensorMismatch},
		{"w", func() error { _, err := ck.F32("w", 6); return err }, ErrTensorMismatch},
		{"w", func() error { _, err := ck.F32("w"); return err }, ErrTensorMismatch},
		{"step", func() error { _, err := ck.I64("step", 1); return err }, ErrTensorMismatch},
		{"broken", func() error { _, err := ck.F32("broken", 4); return err }, ErrTensorMismatch},
		{"nil", func() error { _, err := (*Checkpoint)(nil).U8("nil"); return err }, ErrMissingTensor},
	}
	for i, c := range cases {
		err := c.call()
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), `"`+c.name+`"`) {
			t.Errorf("case %d: error = %v, want %v naming %q", i, err, c.want, c.name)
		}
	}
}
