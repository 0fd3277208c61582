package cpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
)

// Tensors returns the learner's state as checkpoint tensors, in this order
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
// tensors own their data.
func (l *Learner) Tensors() []checkpoint.Tensor {
	blocks := Layout(l.online.model)
	ts := make([]checkpoint.Tensor, 0, 4*len(blocks)+3+NumLayers)
	for _, net := range []struct {
		prefix string
		p      []float32
	}{{"online.", l.online.params}, {"target.", l.target.params}} {
		for _, b := range blocks {
			ts = append(ts, checkpoint.F32Tensor(net.prefix+b.Name, b.Shape(), net.p[b.Offset:b.Offset+b.Size()]))
		}
	}
	np := len(l.m)
	ts = append(ts,
		checkpoint.F32Tensor("adam.m", []int{np}, l.m),
		checkpoint.F32Tensor("adam.v", []int{np}, l.v),
		checkpoint.I64Tensor("adam.step", []int{1}, []int64{l.step}))
	for i, ly := range l.online.lay {
		ts = append(ts, checkpoint.F32Tensor("spectral."+ly.name+".u", []int{ly.out}, l.u[i]))
	}
	return ts
}

// LoadTensors replaces the learner's state by the tensors of ck that
// Tensors names; other tensors of ck (replay buffer, random states) are
// ignored. Every tensor must be present once with its dtype and shape,
// hold finite values, and adam.v must not be negative nor adam.step
// negative. On error, which names the tensor, the learner is unchanged.
func (l *Learner) LoadTensors(ck *checkpoint.Checkpoint) error {
	idx, err := indexTensors(ck)
	if err != nil {
		return err
	}
	np := len(l.online.params)
	online, target := make([]float32, np), make([]float32, np)
	m, v := make([]float32, np), make([]float32, np)
	if err := readParams(idx, "online.", l.online.model, online); err != nil {
		return err
	}
	if err := readParams(idx, "target.", l.online.model, target); err != nil {
		return err
	}
	if err := readF32(idx, "adam.m", []int{np}, m); err != nil {
		return err
	}
	if err := readF32(idx, "adam.v", []int{np}, v); err != nil {
		return err
	}
	if i := slices.IndexFunc(v, func(x float32) bool { return x < 0 }); i >= 0 {
		return fmt.Errorf("checkpoint tensor adam.v: element %d is %g: a second moment cannot be negative", i, v[i])
	}
	step := make([]int64, 1)
	if err := readI64(idx, "adam.step", []int{1}, step); err != nil {
		return err
	}
	if step[0] < 0 {
		return fmt.Errorf("checkpoint tensor adam.step: %d: must not be negative", step[0])
	}
	var u [NumLayers][]float32
	for i, ly := range l.online.lay {
		u[i] = make([]float32, ly.out)
		if err := readF32(idx, "spectral."+ly.name+".u", []int{ly.out}, u[i]); err != nil {
			return err
		}
	}
	copy(l.online.params, online)
	copy(l.target.params, target)
	copy(l.m, m)
	copy(l.v, v)
	l.step = step[0]
	for i := range u {
		copy(l.u[i], u[i])
	}
	l.online.refresh()
	l.target.refresh()
	return nil
}

// NewPolicyNet builds a network for inference (QValues, Greedy) from the
// online parameters of a checkpoint written from Learner.Tensors, for model
// m in the given precision mode. The checkpoint's other tensors are
// ignored.
func NewPolicyNet(m config.ModelConfig, precision string, ck *checkpoint.Checkpoint) (*Net, error) {
	n, err := newNet(m, precision)
	if err != nil {
		return nil, err
	}
	idx, err := indexTensors(ck)
	if err != nil {
		return nil, err
	}
	if err := readParams(idx, "online.", m, n.params); err != nil {
		return nil, err
	}
	n.refresh()
	return n, nil
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

// readParams reads the parameter blocks prefix+<block> of model m into p.
func readParams(idx map[string]*checkpoint.Tensor, prefix string, m config.ModelConfig, p []float32) error {
	for _, b := range Layout(m) {
		if err := readF32(idx, prefix+b.Name, b.Shape(), p[b.Offset:b.Offset+b.Size()]); err != nil {
			return err
		}
	}
	return nil
}

// lookup finds tensor name and checks its dtype, shape and data length.
func lookup(idx map[string]*checkpoint.Tensor, name string, dt checkpoint.DType, shape []int) (*checkpoint.Tensor, error) {
	t, ok := idx[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint tensor %s: missing", name)
	}
	if t.DType != dt {
		return nil, fmt.Errorf("checkpoint tensor %s: dtype %s, want %s", name, t.DType, dt)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("checkpoint tensor %s: shape %v, want %v (does the model config match?)", name, t.Shape, shape)
	}
	n := dt.Size()
	for _, s := range shape {
		n *= s
	}
	if len(t.Data) != n {
		return nil, fmt.Errorf("checkpoint tensor %s: %d bytes of data, want %d for shape %v", name, len(t.Data), n, shape)
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
	if i := firstNonFinite(dst); i >= 0 {
		return fmt.Errorf("checkpoint tensor %s: element %d is %g: %w", name, i, dst[i], errNotFinite)
	}
	return nil
}

// readI64 decodes the I64 tensor name of the given shape into dst.
func readI64(idx map[string]*checkpoint.Tensor, name string, shape []int, dst []int64) error {
	t, err := lookup(idx, name, checkpoint.I64, shape)
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return nil
}
