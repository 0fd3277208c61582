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

// weights is the contract of the tensors of ck named prefix + something:
// each with its own shape, F32 or BF16. The conversion tests export
// whatever they built.
func weights(ck *Checkpoint, prefix string) []Spec {
	var out []Spec
	for _, t := range ck.Tensors {
		if strings.HasPrefix(t.Name, prefix) {
			out = append(out, Spec{Name: t.Name, Shape: t.Shape, DTypes: []DType{F32, BF16}})
		}
	}
	return out
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
	ck := trained([]float32{1, 2, 3})
	out, rep, err := Export(ck, F32, "online.", weights(ck, "online."))
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
	if _, err := Write(filepath.Join(t.TempDir(), "export.safetensors"), out, Options{}); err != nil {
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
		{math.SmallestNonzeroFloat32, 0x0}, // flushed
	}
	var in []float32
	for _, c := range cases {
		in = append(in, c.in)
	}
	ck := &Checkpoint{Tensors: []Tensor{F32Tensor("online.v2.weight", []int{len(in)}, in)}}
	out, rep, err := Export(ck, F16, "online.", weights(ck, "online."))
	if err != nil {
		t.Fatal(err)
	}
	got := u16s(out.Tensors[0])
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("f16(%g) = %#04x, want %#04x", c.in, got[i], c.want)
		}
	}
	want := ExportReport{Tensors: 1, Values: len(cases), FlushedToZero: 3, Subnormal: 4}
	if rep != want {
		t.Errorf("report = %+v, want %+v", rep, want)
	}
	if out.Meta[MetaDType] != "F16" {
		t.Errorf("dtype metadata = %q, want F16", out.Meta[MetaDType])
	}
}

// TestExportF16RefusesOverflow checks that one finite value past the f16
// range makes the export fail with ErrOverflow, naming the first
// offending tensor, element and value and returning no checkpoint.
func TestExportF16RefusesOverflow(t *testing.T) {
	ck := &Checkpoint{Tensors: []Tensor{
		F32Tensor("online.s1.weight", []int{2}, []float32{1, 2}),
		F32Tensor("online.s2.weight", []int{3}, []float32{65520, -1e6, 3}),
		F32Tensor("online.v1.weight", []int{1}, []float32{7e4}),
	}}
	out, rep, err := Export(ck, F16, "online.", weights(ck, "online."))
	if !errors.Is(err, ErrOverflow) || out != nil {
		t.Fatalf("Export = %v, %v; want no checkpoint and ErrOverflow", out, err)
	}
	for _, s := range []string{`"s2.weight"`, "element 0 ", "65520", "3 values"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
	if rep.Overflow != 3 {
		t.Errorf("report counts %d overflows, want 3", rep.Overflow)
	}
	if _, _, err := Export(ck, BF16, "online.", weights(ck, "online.")); err != nil {
		t.Errorf("bf16 export of the same weights: %v (bf16 covers ±3.4e38)", err)
	}
}

// TestExportBF16MatchesBF16Package checks that bf16 export is
// bf16.FromFloat32 element by element, that an exported bf16 file
// re-exports to f32 exactly, and that a finite weight rounding past the
// largest finite bf16 refuses the export (the file would hold an Inf).
func TestExportBF16MatchesBF16Package(t *testing.T) {
	in := []float32{1, 1.00390625, 1.01171875, -3.14159, 3.3e38, 1e-39}
	ck := trained(in)
	out, rep, err := Export(ck, BF16, "online.", weights(ck, "online."))
	if err != nil {
		t.Fatal(err)
	}
	got := u16s(out.Tensors[0])
	for i, v := range in {
		if want := uint16(bf16.FromFloat32(v)); got[i] != want {
			t.Errorf("bf16(%g) = %#04x, want %#04x", v, got[i], want)
		}
	}
	// 1e-39 becomes a bf16 subnormal.
	if rep.Overflow != 0 || rep.Subnormal != 1 {
		t.Errorf("report = %+v, want no overflow, 1 subnormal", rep)
	}
	back, _, err := Export(out, F32, "", weights(out, ""))
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
	// 3.4e38 rounds past the largest finite bf16 (3.39e38).
	big := trained([]float32{1, 3.4e38})
	if out, rep, err := Export(big, BF16, "online.", weights(big, "online.")); !errors.Is(err, ErrOverflow) || out != nil ||
		rep.Overflow != 1 || !strings.Contains(err.Error(), "element 1 [0, 1]") {
		t.Errorf("bf16 export of 3.4e38: %v, %+v, %v; want ErrOverflow at element 1 [0, 1] and no checkpoint", out, rep, err)
	}
}

// TestExportRefusesNonFiniteWeights: a NaN or an infinity anywhere in a
// weight the contract names is refused with ErrNotFinite, naming the
// tensor and the first bad element, in every dtype; nothing is returned.
func TestExportRefusesNonFiniteWeights(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		ck := trained([]float32{1, 2, 3, 4})
		ck.Tensors[3] = F32Tensor("online.s1.bias", []int{2, 2}, []float32{0.5, 1, bad, bad})
		for _, dt := range []DType{F32, BF16, F16} {
			out, _, err := Export(ck, dt, "online.", weights(ck, "online."))
			if !errors.Is(err, ErrNotFinite) || out != nil || !strings.Contains(err.Error(), `"online.s1.bias" element 2 [1, 0]`) {
				t.Errorf("%s export of %v: %v, %v; want ErrNotFinite naming online.s1.bias element 2 [1, 0]", dt, bad, out, err)
			}
		}
	}
}

// TestExportRefusesAnIncompleteCheckpoint: a tensor of the contract that
// the checkpoint lacks, or holds with another shape, refuses the export
// with an error naming it; the export never holds fewer tensors than the
// contract.
func TestExportRefusesAnIncompleteCheckpoint(t *testing.T) {
	ck := trained([]float32{1, 2, 3})
	want := append(weights(ck, "online."), Spec{Name: "online.v1.weight", Shape: []int{2, 3}, DTypes: []DType{F32, BF16}})
	if out, _, err := Export(ck, F16, "online.", want); !errors.Is(err, ErrMissingTensor) || out != nil || !strings.Contains(err.Error(), "online.v1.weight") {
		t.Errorf("Export with online.v1.weight missing: %v, %v; want ErrMissingTensor naming it", out, err)
	}
	want[0].Shape = []int{3, 1}
	if out, _, err := Export(ck, F32, "online.", want[:2]); !errors.Is(err, ErrTensorMismatch) || out != nil || !strings.Contains(err.Error(), "online.s1.weight: shape [1 3], want [3 1]") {
		t.Errorf("Export with online.s1.weight of another shape: %v, %v; want ErrTensorMismatch naming it", out, err)
	}
}

// TestExportRejectsBadInput checks the errors of an export that cannot be
// done; none panics.
func TestExportRejectsBadInput(t *testing.T) {
	ck := trained([]float32{1})
	step := []Spec{{Name: "step", DTypes: []DType{I64}}}
	cases := []struct {
		name, reason string
		ck           *Checkpoint
		dtype        DType
		prefix       string
		want         []Spec
	}{
		{"nil", "nil checkpoint", nil, F32, "online.", weights(ck, "online.")},
		{"dtype", `"I8"`, ck, "I8", "online.", weights(ck, "online.")},
		{"nothing asked", "no tensors", ck, F16, "policy.", weights(ck, "policy.")},
		{"integer tensor", `"step"`, ck, F32, "", step},
		{"whole name as prefix", "nothing after it", ck, F32, "online.s1.bias", weights(ck, "online.s1.bias")},
		{"short data", "online.w: 4 bytes of data, want 4 F32 values", &Checkpoint{Tensors: []Tensor{F32Tensor("online.w", []int{4}, []float32{1})}}, F16, "online.",
			[]Spec{{Name: "online.w", Shape: []int{4}, DTypes: []DType{F32}}}},
	}
	for _, c := range cases {
		out, _, err := Export(c.ck, c.dtype, c.prefix, c.want)
		if err == nil || out != nil || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: Export = %v, %v; want an error mentioning %s", c.name, out, err, c.reason)
		}
	}
}
