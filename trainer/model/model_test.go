package model_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

var small = config.ModelConfig{Trunk1: 12, Trunk2: 10, Head: 6, Atoms: 5, VMin: -2, VMax: 2}

// TestBranchCountsMatchTheMarket: the contract's counts are the
// environment's action branches.
func TestBranchCountsMatchTheMarket(t *testing.T) {
	if model.NumBranches != len(market.BranchSizes) {
		t.Fatalf("NumBranches = %d, market has %d branches", model.NumBranches, len(market.BranchSizes))
	}
	off := 0
	for d, n := range market.BranchSizes {
		if model.BranchOffset[d] != off {
			t.Errorf("BranchOffset[%d] = %d, want %d", d, model.BranchOffset[d], off)
		}
		off += n
	}
	if model.NumActions != off || model.NumLayers != 4+2*model.NumBranches {
		t.Errorf("NumActions %d (want %d), NumLayers %d (want %d)", model.NumActions, off, model.NumLayers, 4+2*model.NumBranches)
	}
}

// TestLayersAndLayoutAgree: Layout lists every layer's weight then bias,
// at the offsets Layers gives, in order and without gaps, and each layer
// reads the output of its Src.
func TestLayersAndLayoutAgree(t *testing.T) {
	m := config.Defaults().Model
	ls, blocks := model.Layers(m), model.Layout(m)
	if len(blocks) != 2*model.NumLayers {
		t.Fatalf("%d blocks", len(blocks))
	}
	off := 0
	for i, l := range ls {
		w, b := blocks[2*i], blocks[2*i+1]
		if w.Name != l.Name+".weight" || w.Offset != l.W || w.Offset != off || w.Rows != l.Out || w.Cols != l.In || w.Bias {
			t.Errorf("layer %s: weight block %+v at %d", l.Name, w, off)
		}
		off += w.Size()
		if b.Name != l.Name+".bias" || b.Offset != l.B || b.Offset != off || b.Rows != l.Out || !b.Bias || !slices.Equal(b.Shape(), []int{l.Out}) {
			t.Errorf("layer %s: bias block %+v at %d", l.Name, b, off)
		}
		off += b.Size()
		in := market.ObsDim
		if l.Src >= 0 {
			in = ls[l.Src].Out
		}
		if l.In != in {
			t.Errorf("layer %s reads %d values, its source gives %d", l.Name, l.In, in)
		}
	}
	if off != model.NumParams(m) || off != 286385 {
		t.Errorf("layout covers %d, NumParams %d, want 286385", off, model.NumParams(m))
	}
	if ls[model.LayerA2(1)].Out != market.BranchSizes[1]*m.Atoms || ls[model.LayerA1(2)].Src != model.LayerS2 {
		t.Errorf("branch layers: %+v %+v", ls[model.LayerA2(1)], ls[model.LayerA1(2)])
	}
}

// TestCheckNamesTheField: Check rejects what config.Validate rejects,
// naming the field.
func TestCheckNamesTheField(t *testing.T) {
	if err := model.Check(config.Defaults().Model); err != nil {
		t.Fatal(err)
	}
	for field, m := range map[string]config.ModelConfig{
		"model.trunk1": {Trunk1: 0, Trunk2: 1, Head: 1, Atoms: 2, VMin: -1, VMax: 1},
		"model.atoms":  {Trunk1: 1, Trunk2: 1, Head: 1, Atoms: 1, VMin: -1, VMax: 1},
		"model.v_max":  {Trunk1: 1, Trunk2: 1, Head: 1, Atoms: 2, VMin: 1, VMax: 1},
		"model.v_min":  {Trunk1: 1, Trunk2: 1, Head: 1, Atoms: 2, VMin: math.NaN(), VMax: 1},
	} {
		if err := model.Check(m); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// TestInitStreamsAreTheDocumentedDraws recomputes InitParams and
// InitSpectral from their doc comments.
func TestInitStreamsAreTheDocumentedDraws(t *testing.T) {
	const seed = 77
	p := make([]float32, model.NumParams(small))
	model.InitParams(p, small, seed)
	r := rand.NewPCG(seed, model.StreamInit)
	for _, l := range model.Layers(small) {
		k := 1 / math.Sqrt(float64(l.In))
		for i := l.W; i < l.B+l.Out; i++ {
			want := float32((2*float64(r.Uint64()>>11)/(1<<53) - 1) * k)
			if p[i] != want {
				t.Fatalf("param %d = %g, want %g", i, p[i], want)
			}
		}
	}
	u := model.InitSpectral(small, seed)
	g := rand.New(rand.NewPCG(seed, model.StreamSpectral))
	for i, l := range model.Layers(small) {
		raw := make([]float64, l.Out)
		var ss float64
		for k := range raw {
			raw[k] = float64(float32(g.NormFloat64()))
			ss += raw[k] * raw[k]
		}
		for k, x := range raw {
			if want := float32(x / math.Sqrt(ss)); u[i][k] != want {
				t.Fatalf("u of %s [%d] = %g, want %g", l.Name, k, u[i][k], want)
			}
		}
	}
}

// TestSupportIsRoundedOnce: z_j = float32(v_min + j·Δz) with Δz in
// float64; the ends are v_min and v_max.
func TestSupportIsRoundedOnce(t *testing.T) {
	m := config.ModelConfig{Trunk1: 1, Trunk2: 1, Head: 1, Atoms: 51, VMin: -10, VMax: 10.3}
	z, dz, lo, hi := model.Support(m)
	step := (m.VMax - m.VMin) / 50
	if dz != float32(step) || lo != float32(m.VMin) || hi != float32(m.VMax) || z[50] != float32(m.VMax) || z[0] != float32(m.VMin) {
		t.Fatalf("dz %g lo %g hi %g z %g..%g", dz, lo, hi, z[0], z[50])
	}
	if z[17] != float32(m.VMin+17*step) {
		t.Errorf("z[17] = %g", z[17])
	}
}

// TestStateTensorsRoundTrip: ReadState of State.Tensors gives the state
// back bit for bit, under the names of docs/checkpoint-format.md, and
// StateSpecs lists exactly the tensors State.Tensors writes, in its order,
// with their shapes and dtypes.
func TestStateTensorsRoundTrip(t *testing.T) {
	s := model.NewState(small, 3)
	s.Step = 12
	for i := range s.AdamV {
		s.AdamM[i], s.AdamV[i] = float32(i)*1e-6, float32(i)*1e-9
	}
	ts := s.Tensors(small)
	specs := model.StateSpecs(small)
	if len(specs) != len(ts) {
		t.Fatalf("StateSpecs lists %d tensors, State.Tensors writes %d", len(specs), len(ts))
	}
	for i, sp := range specs {
		if sp.Name != ts[i].Name || !slices.Equal(sp.Shape, ts[i].Shape) || !slices.Equal(sp.DTypes, []checkpoint.DType{ts[i].DType}) {
			t.Errorf("spec %d is %s %v %v; State.Tensors writes %s %v %s", i, sp.Name, sp.Shape, sp.DTypes, ts[i].Name, ts[i].Shape, ts[i].DType)
		}
	}
	names := make([]string, len(ts))
	for i, tn := range ts {
		names[i] = tn.Name
	}
	for _, want := range []string{"online.s1.weight", "target.a2_2.bias", "adam.m", "adam.v", "adam.step", "spectral.s1.u", "spectral.a2_2.u"} {
		if !slices.Contains(names, want) {
			t.Errorf("no tensor %s in %v", want, names)
		}
	}
	back, err := model.ReadState(&checkpoint.Checkpoint{Tensors: ts}, small)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Online, s.Online) || !slices.Equal(back.Target, s.Target) || !slices.Equal(back.AdamM, s.AdamM) ||
		!slices.Equal(back.AdamV, s.AdamV) || back.Step != 12 || !slices.Equal(back.U[9], s.U[9]) {
		t.Fatal("state differs after the round trip")
	}
}

// TestReadStateNamesTheDamagedTensor: a missing, mistyped, misshapen,
// duplicated or non-finite tensor, a negative second moment or step, is an
// error naming the tensor and wrapping the right sentinel.
func TestReadStateNamesTheDamagedTensor(t *testing.T) {
	good := model.NewState(small, 1).Tensors(small)
	edit := func(name string, f func(*checkpoint.Tensor)) []checkpoint.Tensor {
		ts := slices.Clone(good)
		for i := range ts {
			if ts[i].Name == name {
				ts[i].Data = slices.Clone(ts[i].Data)
				f(&ts[i])
			}
		}
		return ts
	}
	nan := func(tn *checkpoint.Tensor) { copy(tn.Data, []byte{0, 0, 0xc0, 0x7f}) }
	for _, tc := range []struct {
		name, tensor string
		ts           []checkpoint.Tensor
		sentinel     error
	}{
		{"missing", "online.v2.bias", slices.DeleteFunc(slices.Clone(good), func(x checkpoint.Tensor) bool { return x.Name == "online.v2.bias" }), checkpoint.ErrMissingTensor},
		{"dtype", "adam.m", edit("adam.m", func(tn *checkpoint.Tensor) { tn.DType = checkpoint.I32 }), checkpoint.ErrTensorMismatch},
		{"shape", "target.s2.weight", edit("target.s2.weight", func(tn *checkpoint.Tensor) { tn.Shape = []int{tn.Shape[1], tn.Shape[0]} }), checkpoint.ErrTensorMismatch},
		{"NaN", "spectral.a1_1.u", edit("spectral.a1_1.u", nan), model.ErrNotFinite},
		{"NaN weight", "online.a2_0.weight", edit("online.a2_0.weight", nan), model.ErrNotFinite},
		{"negative v", "adam.v", edit("adam.v", func(tn *checkpoint.Tensor) { copy(tn.Data, []byte{0, 0, 0x80, 0xbf}) }), nil},
		{"negative step", "adam.step", edit("adam.step", func(tn *checkpoint.Tensor) { tn.Data[7] = 0x80 }), nil},
		{"duplicate", "adam.v", append(slices.Clone(good), good[len(good)-1-model.NumLayers-1]), nil},
	} {
		_, err := model.ReadState(&checkpoint.Checkpoint{Tensors: tc.ts}, small)
		if err == nil || !strings.Contains(err.Error(), tc.tensor) || (tc.sentinel != nil && !errors.Is(err, tc.sentinel)) {
			t.Errorf("%s: %v, want an error naming %s (wrapping %v)", tc.name, err, tc.tensor, tc.sentinel)
		}
	}
	if _, err := model.ReadState(nil, small); err == nil {
		t.Error("ReadState(nil) succeeded")
	}
}

// TestReadParamsReadsExportedFiles: the online blocks of a checkpoint
// exported as F32 (prefix "") read back exactly, and as BF16 widen to the
// bf16-rounded values exactly.
func TestReadParamsReadsExportedFiles(t *testing.T) {
	s := model.NewState(small, 5)
	ck := &checkpoint.Checkpoint{Meta: map[string]string{}, Tensors: s.Tensors(small)}
	for _, dt := range []checkpoint.DType{checkpoint.F32, checkpoint.BF16} {
		ex, _, err := checkpoint.Export(ck, dt, model.PrefixOnline, model.ParamSpecs(small, model.PrefixOnline, checkpoint.F32))
		if err != nil {
			t.Fatal(err)
		}
		p, err := model.ReadParams(ex, "", small)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		for i, v := range s.Online {
			want := v
			if dt == checkpoint.BF16 {
				want = bf16.Round(v)
			}
			if p[i] != want {
				t.Fatalf("%s: param %d = %g, want %g", dt, i, p[i], want)
			}
		}
	}
	if _, err := model.ReadParams(ck, model.PrefixOnline, config.Defaults().Model); !errors.Is(err, checkpoint.ErrTensorMismatch) || !strings.Contains(err.Error(), "online.s1.weight") {
		t.Errorf("params of another model: %v", err)
	}
}

// TestStateCheck: Check accepts a fresh state and names what is wrong.
func TestStateCheck(t *testing.T) {
	s := model.NewState(small, 2)
	if err := s.Check(small); err != nil {
		t.Fatal(err)
	}
	for want, f := range map[string]func(*model.State){
		"online.*":       func(s *model.State) { s.Online = s.Online[1:] },
		"target.v1.bias": func(s *model.State) { s.Target[model.Layers(small)[model.LayerV1].B] = float32(math.Inf(1)) },
		"adam.v":         func(s *model.State) { s.AdamV[3] = -1 },
		"adam.step":      func(s *model.State) { s.Step = -1 },
		"spectral.s2.u":  func(s *model.State) { s.U[model.LayerS2] = nil },
	} {
		c := s.Clone()
		f(c)
		if err := c.Check(small); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
