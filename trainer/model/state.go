package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
)

// Checkpoint tensor names of the learner state (docs/checkpoint-format.md).
// A parameter tensor is a prefix and a Layout block name, for example
// PrefixOnline + "s1.weight"; a spectral vector is SpectralTensor(layer).
const (
	PrefixOnline = "online." // F32 [out, in] or [out] per Layout block
	PrefixTarget = "target." // likewise, the target network
	TensorAdamM  = "adam.m"  // F32 [P]: AdamW first moment, Layout order
	TensorAdamV  = "adam.v"  // F32 [P]: AdamW second moment, Layout order
	TensorStep   = "adam.step"
	// spectral.<layer>.u, F32 [out]: see SpectralTensor.
	prefixSpectral = "spectral."
	suffixSpectral = ".u"
)

// SpectralTensor is the name of the spectral-norm vector of layer l:
// "spectral.<l.Name>.u", F32 [l.Out].
func SpectralTensor(l Layer) string { return prefixSpectral + l.Name + suffixSpectral }

// State is the learner state that every backend checkpoints and that the
// cross-backend harness loads into two backends: the online and target
// parameters (NumParams values each, Layout order), the AdamW moments
// (likewise) and the number of AdamW updates done, and the spectral-norm
// vector u_i of each layer (Out_i values).
type State struct {
	Online, Target []float32
	AdamM, AdamV   []float32
	Step           int64
	U              [NumLayers][]float32
}

// NewState returns the state of a fresh learner of model m: online
// parameters from InitParams(seed), the target a copy of them, zero
// moments and step, and u from InitSpectral(seed).
func NewState(m config.ModelConfig, seed uint64) *State {
	np := NumParams(m)
	s := &State{Online: make([]float32, np), AdamM: make([]float32, np), AdamV: make([]float32, np)}
	InitParams(s.Online, m, seed)
	s.Target = slices.Clone(s.Online)
	s.U = InitSpectral(m, seed)
	return s
}

// Clone returns a deep copy of s.
func (s *State) Clone() *State {
	c := &State{
		Online: slices.Clone(s.Online), Target: slices.Clone(s.Target),
		AdamM: slices.Clone(s.AdamM), AdamV: slices.Clone(s.AdamV), Step: s.Step,
	}
	for i := range s.U {
		c.U[i] = slices.Clone(s.U[i])
	}
	return c
}

// Check reports the first way s is not a valid state of model m: a slice
// of the wrong length, a NaN or Inf, a negative second moment or step. The
// error names the checkpoint tensor that holds the value.
func (s *State) Check(m config.ModelConfig) error {
	if s == nil {
		return errors.New("learner state: nil")
	}
	np := NumParams(m)
	for _, f := range []struct {
		name string
		v    []float32
	}{{PrefixOnline + "*", s.Online}, {PrefixTarget + "*", s.Target}, {TensorAdamM, s.AdamM}, {TensorAdamV, s.AdamV}} {
		if len(f.v) != np {
			return fmt.Errorf("learner state %s: %d values, want NumParams = %d", f.name, len(f.v), np)
		}
	}
	for _, f := range []struct {
		prefix string
		v      []float32
	}{{PrefixOnline, s.Online}, {PrefixTarget, s.Target}} {
		if i := FirstNonFinite(f.v); i >= 0 {
			return fmt.Errorf("learner state %s%s: element %d is %g: %w", f.prefix, blockName(m, i), i, f.v[i], ErrNotFinite)
		}
	}
	for _, f := range []struct {
		name string
		v    []float32
	}{{TensorAdamM, s.AdamM}, {TensorAdamV, s.AdamV}} {
		if i := FirstNonFinite(f.v); i >= 0 {
			return fmt.Errorf("learner state %s: element %d is %g: %w", f.name, i, f.v[i], ErrNotFinite)
		}
	}
	if i := slices.IndexFunc(s.AdamV, func(x float32) bool { return x < 0 }); i >= 0 {
		return fmt.Errorf("learner state %s: element %d is %g: a second moment cannot be negative", TensorAdamV, i, s.AdamV[i])
	}
	if s.Step < 0 {
		return fmt.Errorf("learner state %s: %d: must not be negative", TensorStep, s.Step)
	}
	for i, l := range Layers(m) {
		if len(s.U[i]) != l.Out {
			return fmt.Errorf("learner state %s: %d values, want %d", SpectralTensor(l), len(s.U[i]), l.Out)
		}
		if k := FirstNonFinite(s.U[i]); k >= 0 {
			return fmt.Errorf("learner state %s: element %d is %g: %w", SpectralTensor(l), k, s.U[i][k], ErrNotFinite)
		}
	}
	return nil
}

// blockName names the Layout block holding flat index i.
func blockName(m config.ModelConfig, i int) string {
	for _, b := range Layout(m) {
		if i >= b.Offset && i < b.Offset+b.Size() {
			return b.Name
		}
	}
	return "?"
}

// Tensors returns s as checkpoint tensors of model m, in this order
// (P = NumParams, every tensor little-endian, row-major):
//
//	online.<block>     F32  [out, in] or [out]  online parameters, one per Layout block
//	target.<block>     F32  [out, in] or [out]  target parameters, likewise
//	adam.m             F32  [P]                 AdamW first moment, Layout order
//	adam.v             F32  [P]                 AdamW second moment, Layout order
//	adam.step          I64  [1]                 AdamW updates done (t)
//	spectral.<layer>.u F32  [out]               spectral-norm vector of each weight matrix
//
// where <block> is a Layout name such as "s1.weight" or "a2_0.bias" and
// <layer> one of s1, s2, v1, v2, a1_0, a2_0, a1_1, a2_1, a1_2, a2_2. The
// tensors own their data. s must be a state of m (see Check).
func (s *State) Tensors(m config.ModelConfig) []checkpoint.Tensor {
	blocks := Layout(m)
	ts := make([]checkpoint.Tensor, 0, 4*len(blocks)+3+NumLayers)
	for _, net := range []struct {
		prefix string
		p      []float32
	}{{PrefixOnline, s.Online}, {PrefixTarget, s.Target}} {
		for _, b := range blocks {
			ts = append(ts, checkpoint.F32Tensor(net.prefix+b.Name, b.Shape(), net.p[b.Offset:b.Offset+b.Size()]))
		}
	}
	np := len(s.AdamM)
	ts = append(ts,
		checkpoint.F32Tensor(TensorAdamM, []int{np}, s.AdamM),
		checkpoint.F32Tensor(TensorAdamV, []int{np}, s.AdamV),
		checkpoint.I64Tensor(TensorStep, []int{1}, []int64{s.Step}))
	for i, l := range Layers(m) {
		ts = append(ts, checkpoint.F32Tensor(SpectralTensor(l), []int{l.Out}, s.U[i]))
	}
	return ts
}

// StateSpecs is the model contract of a training checkpoint: every tensor
// State.Tensors writes for model m, with its dtype and shape, in that
// order. A checkpoint that lacks one, or holds one differently, cannot
// restore a trainer (checkpoint.Checkpoint.Require says which).
func StateSpecs(m config.ModelConfig) []checkpoint.Spec {
	np := NumParams(m)
	f32 := []checkpoint.DType{checkpoint.F32}
	specs := append(ParamSpecs(m, PrefixOnline, checkpoint.F32), ParamSpecs(m, PrefixTarget, checkpoint.F32)...)
	specs = append(specs,
		checkpoint.Spec{Name: TensorAdamM, Shape: []int{np}, DTypes: f32},
		checkpoint.Spec{Name: TensorAdamV, Shape: []int{np}, DTypes: f32},
		checkpoint.Spec{Name: TensorStep, Shape: []int{1}, DTypes: []checkpoint.DType{checkpoint.I64}})
	for _, l := range Layers(m) {
		specs = append(specs, checkpoint.Spec{Name: SpectralTensor(l), Shape: []int{l.Out}, DTypes: f32})
	}
	return specs
}

// ParamSpecs is the model contract of one network of model m: the tensor
// prefix+<block> of every Layout block, with the block's shape, in any of
// dtypes (PrefixOnline and F32 in a training checkpoint; "" and the
// export's dtype in a file of `dqnflow checkpoint export`).
func ParamSpecs(m config.ModelConfig, prefix string, dtypes ...checkpoint.DType) []checkpoint.Spec {
	blocks := Layout(m)
	specs := make([]checkpoint.Spec, len(blocks))
	for i, b := range blocks {
		specs[i] = checkpoint.Spec{Name: prefix + b.Name, Shape: b.Shape(), DTypes: dtypes}
	}
	return specs
}

// ReadState decodes the learner state of model m from the tensors of ck
// that State.Tensors names (StateSpecs); other tensors (replay buffer,
// random states) are ignored. Every tensor must be present once with its
// dtype and shape and hold finite values; adam.v and adam.step must not be
// negative. An error names the tensor; one about a missing or misshapen
// tensor wraps checkpoint.ErrMissingTensor or ErrTensorMismatch, one about
// a NaN or Inf wraps ErrNotFinite.
func ReadState(ck *checkpoint.Checkpoint, m config.ModelConfig) (*State, error) {
	if err := ck.Require(StateSpecs(m)); err != nil {
		return nil, err
	}
	np := NumParams(m)
	s := &State{AdamM: make([]float32, np), AdamV: make([]float32, np)}
	var err error
	if s.Online, err = readParams(ck, PrefixOnline, m); err != nil {
		return nil, err
	}
	if s.Target, err = readParams(ck, PrefixTarget, m); err != nil {
		return nil, err
	}
	if err := readF32(ck, TensorAdamM, s.AdamM); err != nil {
		return nil, err
	}
	if err := readF32(ck, TensorAdamV, s.AdamV); err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(s.AdamV, func(x float32) bool { return x < 0 }); i >= 0 {
		return nil, fmt.Errorf("checkpoint tensor %s: element %d is %g: a second moment cannot be negative", TensorAdamV, i, s.AdamV[i])
	}
	t, _ := ck.Find(TensorStep)
	if s.Step = int64(binary.LittleEndian.Uint64(t.Data)); s.Step < 0 {
		return nil, fmt.Errorf("checkpoint tensor %s: %d: must not be negative", TensorStep, s.Step)
	}
	for i, l := range Layers(m) {
		s.U[i] = make([]float32, l.Out)
		if err := readF32(ck, SpectralTensor(l), s.U[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ReadParams decodes the parameter blocks prefix+<block> of model m from
// ck into a new flat vector (Layout order): PrefixOnline for a policy or a
// warm start, PrefixTarget, or "" for a file of `dqnflow checkpoint
// export`. Each block must be present once with its Layout shape, as F32
// or, widened exactly, BF16; every value must be finite. An error names
// the tensor; one about a NaN or Inf wraps ErrNotFinite.
func ReadParams(ck *checkpoint.Checkpoint, prefix string, m config.ModelConfig) ([]float32, error) {
	if err := ck.Require(ParamSpecs(m, prefix, checkpoint.F32, checkpoint.BF16)); err != nil {
		return nil, err
	}
	return readParams(ck, prefix, m)
}

// readParams decodes the blocks prefix+<block> of ck, which Require has
// found complete.
func readParams(ck *checkpoint.Checkpoint, prefix string, m config.ModelConfig) ([]float32, error) {
	p := make([]float32, NumParams(m))
	for _, b := range Layout(m) {
		name := prefix + b.Name
		dst := p[b.Offset : b.Offset+b.Size()]
		if t, _ := ck.Find(name); t.DType == checkpoint.BF16 {
			for i := range dst {
				dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
			}
			if i := FirstNonFinite(dst); i >= 0 {
				return nil, fmt.Errorf("checkpoint tensor %s: element %d is %g: %w", name, i, dst[i], ErrNotFinite)
			}
			continue
		}
		if err := readF32(ck, name, dst); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// readF32 decodes the F32 tensor name, which Require has checked, into dst
// and rejects NaN and Inf.
func readF32(ck *checkpoint.Checkpoint, name string, dst []float32) error {
	t, _ := ck.Find(name)
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	if i := FirstNonFinite(dst); i >= 0 {
		return fmt.Errorf("checkpoint tensor %s: element %d is %g: %w", name, i, dst[i], ErrNotFinite)
	}
	return nil
}
