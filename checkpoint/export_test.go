package checkpoint

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/bf16"
)

// trained is a trainer-like checkpoint: online and target blocks, optimiser
// state, a step counter and full metadata.
func trained(w []float32) *Checkpoint {
	return &Checkpoint{
		Meta: map[string]string{
			MetaFormat: FormatVersion, MetaRunID: "r", MetaEpoch: "3", MetaGlobalStep: "900",
			MetaPrecision: "fp32", MetaBackend: "cpu", MetaConfig: `{"model":{"atoms":51}}`,
			MetaInstrument: `{"tick_size":0.25}`, MetaNormalizer: `{"mean":[0]}`, "replay.note": "x",
		},
		Tensors: []Tensor{
			F32Tensor("online.s1.weight", []int{1, len(w)}, w),
			F32Tensor("target.s1.weight", []int{1, len(w)}, w),
			F32Tensor("adam.m.s1.weight", []int{1, len(w)}, w),
			F32Tensor("online.s1.bias", []int{1}, []float32{0.5}),
			I64Tensor("step", nil, []int64{900}),
		},
	}
}

func u16s(t Tensor) []uint16 {
	v := make([]uint16, len(t.Data)/2)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(t.Data[2*i:])
	}
	return v
}

// TestExportKeepsTheOnlineNetworkRenamed checks the selection, the names,
// the order, the shapes and the metadata of an export.
func TestExportKeepsTheOnlineNetworkRenamed(t *testing.T) {
	out, rep, err := Export(trained([]float32{1, 2, 3}), F32, "online.")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range out.Tensors {
		names = append(names, x.Name+":"+string(x.DType))
	}
	if want := []string{"s1.weight:F32", "s1.bias:F32"}; !reflect.DeepEqual(names, want) {
		t.Errorf("tensors %v, want %v", names, want)
	}
	if w, err := out.F32("s1.weight", 1, 3); err != nil || !reflect.DeepEqual(w, []float32{1, 2, 3}) {
		t.Errorf("s1.weight = %v, %v", w, err)
	}
	wantMeta := map[string]string{
		MetaFormat: FormatVersion, MetaRunID: "r", MetaEpoch: "3", MetaGlobalStep: "900",
		MetaConfig: `{"model":{"atoms":51}}`, MetaInstrument: `{"tick_size":0.25}`,
		MetaNormalizer: `{"mean":[0]}`, MetaDType: "F32",
	}
	if !reflect.DeepEqual(out.Meta, wantMeta) {
		t.Errorf("meta = %v, want %v", out.Meta, wantMeta)
	}
	if rep != (ExportReport{Tensors: 2, Values: 4}) {
		t.Errorf("report = %+v, want 2 tensors, 4 values, nothing lost", rep)
	}
	if _, err := Write(filepath.Join(t.TempDir(), "export.safetensors"), out); err != nil {
		t.Errorf("the export does not write: %v", err)
	}
}

// TestExportF16HandPickedValues checks binary16 conversion at its edges
// against hand-worked bit patterns and the report's counts.
func TestExportF16HandPickedValues(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},                    // largest finite: stays
		{65519, 0x7bff},                    // below the halfway point to 65536: rounds down
		{-65504, 0xfbff},                   // negative largest finite
		{6.103515625e-05, 0x0400},          // 2^-14, smallest normal
		{6.1e-05, 0x03ff},                  // just below: largest subnormal (subnormal)
		{6e-08, 0x0001},                    // near 2^-24, the smallest subnormal (subnormal)
		{-6e-08, 0x8001},                   // (subnormal)
		{3e-08, 0x0001},                    // just above half of 2^-24: rounds up (subnormal)
		{1e-08, 0x0000},                    // below half of 2^-24: flushed to zero
		{-1e-08, 0x8000},                   // flushed to -0
		{float32(math.Inf(1)), 0x7c00},     // already infinite: not an overflow
		{float32(math.NaN()), 0x7e00},      // NaN stays NaN
		{math.SmallestNonzeroFloat32, 0x0}, // flushed
	}
	var in []float32
	for _, c := range cases {
		in = append(in, c.in)
	}
	ck := &Checkpoint{Tensors: []Tensor{F32Tensor("online.v2.weight", []int{len(in)}, in)}}
	out, rep, err := Export(ck, F16, "online.")
	if err != nil {
		t.Fatal(err)
	}
	got := u16s(out.Tensors[0])
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("f16(%g) = %#04x, want %#04x", c.in, got[i], c.want)
		}
	}
	want := ExportReport{Tensors: 1, Values: len(cases), FlushedToZero: 3, Subnormal: 4, NonFinite: 2}
	if rep != want {
		t.Errorf("report = %+v, want %+v", rep, want)
	}
	if out.Meta[MetaDType] != "F16" {
		t.Errorf("dtype metadata = %q, want F16", out.Meta[MetaDType])
	}
}

// TestExportF16RefusesOverflow checks that one finite value past the f16
// range makes the export fail with ErrF16Overflow, naming the first
// offending tensor and value and returning no checkpoint.
func TestExportF16RefusesOverflow(t *testing.T) {
	ck := &Checkpoint{Tensors: []Tensor{
		F32Tensor("online.s1.weight", []int{2}, []float32{1, 2}),
		F32Tensor("online.s2.weight", []int{3}, []float32{65520, -1e6, 3}),
		F32Tensor("online.v1.weight", []int{1}, []float32{7e4}),
	}}
	out, rep, err := Export(ck, F16, "online.")
	if !errors.Is(err, ErrF16Overflow) || out != nil {
		t.Fatalf("Export = %v, %v; want no checkpoint and ErrF16Overflow", out, err)
	}
	for _, s := range []string{`"s2.weight"`, "65520", "3 values"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
	if rep.Overflow != 3 {
		t.Errorf("report counts %d overflows, want 3", rep.Overflow)
	}
	if _, _, err := Export(ck, BF16, "online."); err != nil {
		t.Errorf("bf16 export of the same weights: %v (bf16 covers ±3.4e38)", err)
	}
}

// TestExportBF16MatchesBF16Package checks that bf16 export is
// bf16.FromFloat32 element by element, NaN included, and that an exported
// bf16 file re-exports to f32 exactly.
func TestExportBF16MatchesBF16Package(t *testing.T) {
	in := []float32{1, 1.00390625, 1.01171875, -3.14159, float32(math.NaN()), 3.4e38, 1e-39}
	out, rep, err := Export(trained(in), BF16, "online.")
	if err != nil {
		t.Fatal(err)
	}
	got := u16s(out.Tensors[0])
	for i, v := range in {
		if want := uint16(bf16.FromFloat32(v)); got[i] != want {
			t.Errorf("bf16(%g) = %#04x, want %#04x", v, got[i], want)
		}
	}
	// 3.4e38 rounds past the largest finite bf16 (3.39e38); 1e-39 becomes a
	// bf16 subnormal; the NaN is carried over.
	if rep.Overflow != 1 || rep.Subnormal != 1 || rep.NonFinite != 1 {
		t.Errorf("report = %+v, want 1 overflow, 1 subnormal, 1 non-finite", rep)
	}
	back, _, err := Export(out, F32, "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := back.F32("s1.weight", 1, len(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if math.Float32bits(w[i]) != uint32(got[i])<<16 {
			t.Errorf("bf16→f32 element %d = %#08x, want %#08x", i, math.Float32bits(w[i]), uint32(got[i])<<16)
		}
	}
}

// TestExportRejectsBadInput checks the errors of an export that cannot be
// done; none panics.
func TestExportRejectsBadInput(t *testing.T) {
	ck := trained([]float32{1})
	cases := []struct {
		name, reason string
		ck           *Checkpoint
		dtype        DType
		prefix       string
	}{
		{"nil", "nil checkpoint", nil, F32, "online."},
		{"dtype", `"I8"`, ck, "I8", "online."},
		{"no match", `"policy."`, ck, F16, "policy."},
		{"integer tensor", `"step"`, ck, F32, ""},
		{"whole name as prefix", "nothing is left", ck, F32, "online.s1.bias"},
		{"short data", `"online.w"`, &Checkpoint{Tensors: []Tensor{F32Tensor("online.w", []int{4}, []float32{1})}}, F16, "online."},
	}
	for _, c := range cases {
		out, _, err := Export(c.ck, c.dtype, c.prefix)
		if err == nil || out != nil || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: Export = %v, %v; want an error mentioning %s", c.name, out, err, c.reason)
		}
	}
}
