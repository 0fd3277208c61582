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

// ReadState decodes the learner state of model m from the tensors of ck
// that State.Tensors names; other tensors (replay buffer, random states)
// are ignored. Every tensor must be present once with its dtype and shape
// and hold finite values; adam.v and adam.step must not be negative. An
// error names the tensor; one about a missing or misshapen tensor wraps
// checkpoint.ErrMissingTensor or ErrTensorMismatch, one about a NaN or Inf
// wraps ErrNotFinite.
func ReadState(ck *checkpoint.Checkpoint, m config.ModelConfig) (*State, error) {
	idx, err := indexTensors(ck)
	if err != nil {
		return nil, err
	}
	np := NumParams(m)
	s := &State{AdamM: make([]float32, np), AdamV: make([]float32, np)}
	if s.Online, err = readParams(idx, PrefixOnline, m); err != nil {
		return nil, err
	}
	if s.Target, err = readParams(idx, PrefixTarget, m); err != nil {
		return nil, err
	}
	if err := readF32(idx, TensorAdamM, []int{np}, s.AdamM); err != nil {
		return nil, err
	}
	if err := readF32(idx, TensorAdamV, []int{np}, s.AdamV); err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(s.AdamV, func(x float32) bool { return x < 0 }); i >= 0 {
		return nil, fmt.Errorf("checkpoint tensor %s: element %d is %g: a second moment cannot be negative", TensorAdamV, i, s.AdamV[i])
	}
	t, err := lookup(idx, TensorStep, checkpoint.I64, []int{1})
	if err != nil {
		return nil, err
	}
	if s.Step = int64(binary.LittleEndian.Uint64(t.Data)); s.Step < 0 {
		return nil, fmt.Errorf("checkpoint tensor %s: %d: must not be negative", TensorStep, s.Step)
	}
	for i, l := range Layers(m) {
		s.U[i] = make([]float32, l.Out)
		if err := readF32(idx, SpectralTensor(l), []int{l.Out}, s.U[i]); err != nil {
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
	idx, err := indexTensors(ck)
	if err != nil {
		return nil, err
	}
	return readParams(idx, prefix, m)
}

func readParams(idx map[string]*checkpoint.Tensor, prefix string, m config.ModelConfig) ([]float32, error) {
	p := make([]float32, NumParams(m))
	for _, b := range Layout(m) {
		name := prefix + b.Name
		dst := p[b.Offset : b.Offset+b.Size()]
		if t, ok := idx[name]; ok && t.DType == checkpoint.BF16 {
			if _, err := lookup(idx, name, checkpoint.BF16, b.Shape()); err != nil {
				return nil, err
			}
			for i := range dst {
				dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
			}
			if i := FirstNonFinite(dst); i >= 0 {
				return nil, fmt.Errorf("checkpoint tensor %s: element %d is %g: %w", name, i, dst[i], ErrNotFinite)
			}
			continue
		}
		if err := readF32(idx, name, b.Shape(), dst); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// indexTensors maps the tensor names of ck to the tensors, rejecting a nil
// checkpoint and duplicate names.
func indexTensors(ck *checkpoint.Checkpoint) (map[string]*checkpoint.Tensor, error) {
	if ck == nil {
		return nil, errors.New("load tensors: checkpoint is nil")
	}
	idx := make(map[string]*checkpoint.Tensor, len(ck.Tensors))
	for i := range ck.Tensors {
		t := &ck.Tensors[i]
		if _, dup := idx[t.Name]; dup {
			return nil, fmt.Errorf("checkpoint tensor %s: appears more than once", t.Name)
		}
		idx[t.Name] = t
	}
	return idx, nil
}

// lookup finds tensor name and checks its dtype, shape and data length;
// its errors wrap checkpoint.ErrMissingTensor or ErrTensorMismatch.
func lookup(idx map[string]*checkpoint.Tensor, name string, dt checkpoint.DType, shape []int) (*checkpoint.Tensor, error) {
	t, ok := idx[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint tensor %s: missing (%w)", name, checkpoint.ErrMissingTensor)
	}
	if t.DType != dt {
		return nil, fmt.Errorf("checkpoint tensor %s: dtype %s, want %s (%w)", name, t.DType, dt, checkpoint.ErrTensorMismatch)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("checkpoint tensor %s: shape %v, want %v: does the model config match? (%w)", name, t.Shape, shape, checkpoint.ErrTensorMismatch)
	}
	n := dt.Size()
	for _, s := range shape {
		n *= s
	}
	if len(t.Data) != n {
		return nil, fmt.Errorf("checkpoint tensor %s: %d bytes of data, want %d for shape %v (%w)", name, len(t.Data), n, shape, checkpoint.ErrTensorMismatch)
	}
	return t, nil
}

// readF32 decodes the F32 tensor name of the given shape into dst and
// rejects NaN and Inf.
func readF32(idx map[string]*checkpoint.Tensor, name string, shape []int, dst []float32) error {
	t, err := lookup(idx, name, checkpoint.F32, shape)
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	if i := FirstNonFinite(dst); i >= 0 {
		return fmt.Errorf("checkpoint tensor %s: element %d is %g: %w", name, i, dst[i], ErrNotFinite)
	}
	return nil
}
