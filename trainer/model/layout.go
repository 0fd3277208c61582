package model

import (
	"fmt"
	"math"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// NumLayers is the number of linear layers, and so of weight matrices, of
// the network: s1, s2, v1, v2 and a1_d, a2_d for the three branches.
const NumLayers = 10

// NumBranches is the number of action branches (direction, size, exit),
// len(market.BranchSizes), as an untyped constant.
const NumBranches = 3

// NumActions is the number of branch actions over all branches (3+4+3).
// Q values and distributions hold this many actions per observation,
// branch after branch.
const NumActions = market.NumDirections + market.NumSizes + market.NumExits

// BranchOffset[d] is the index of branch d's first action among the
// NumActions branch actions.
var BranchOffset = [NumBranches]int{0, market.NumDirections, market.NumDirections + market.NumSizes}

// Block is one named tensor of the flat parameter vector: the weight of a
// layer, Rows×Cols = out×in stored row-major like PyTorch's nn.Linear.weight,
// or its bias, Rows = out elements (Cols = 1).
type Block struct {
	Name   string // "s1.weight", "s1.bias", …, "a2_2.bias"
	Offset int    // index of the first element in the flat vector
	Rows   int
	Cols   int
	Bias   bool // a bias vector, shape [Rows]
}

// Size is the number of elements of b.
func (b Block) Size() int { return b.Rows * b.Cols }

// Shape is the tensor shape of b: [Rows, Cols] for a weight, [Rows] for a
// bias.
func (b Block) Shape() []int {
	if b.Bias {
		return []int{b.Rows}
	}
	return []int{b.Rows, b.Cols}
}

// Layer is one linear layer y = x·Wᵀ + b with W at params[W:W+Out·In]
// (Out×In, row-major) and b at params[B:B+Out]. Src is the layer whose
// output is its input, or -1 for the observation.
type Layer struct {
	Name    string // s1, s2, v1, v2, a1_0, a2_0, a1_1, a2_1, a1_2, a2_2
	In, Out int
	W, B    int // offsets of weight and bias in the flat vector
	Src     int // -1 = observation
	ReLU    bool
}

// Layer indices, in layout order.
const (
	LayerS1 = 0
	LayerS2 = 1
	LayerV1 = 2
	LayerV2 = 3
)

// LayerA1 is the index of branch d's hidden advantage layer a1_d.
func LayerA1(d int) int { return 4 + 2*d }

// LayerA2 is the index of branch d's advantage output layer a2_d.
func LayerA2(d int) int { return 5 + 2*d }

// Layers returns the ten layers of m in layout order:
//
//	s1   ObsDim → Trunk1, ReLU
//	s2   Trunk1 → Trunk2, ReLU
//	v1   Trunk2 → Head, ReLU
//	v2   Head → Atoms
//	a1_d Trunk2 → Head, ReLU            for d = 0, 1, 2
//	a2_d Head → n_d·Atoms               (row a·Atoms + j: action a, atom j)
//
// with a1_0, a2_0, a1_1, a2_1, a1_2, a2_2 interleaved in that order.
func Layers(m config.ModelConfig) [NumLayers]Layer {
	var ls [NumLayers]Layer
	ls[LayerS1] = Layer{Name: "s1", In: market.ObsDim, Out: m.Trunk1, Src: -1, ReLU: true}
	ls[LayerS2] = Layer{Name: "s2", In: m.Trunk1, Out: m.Trunk2, Src: LayerS1, ReLU: true}
	ls[LayerV1] = Layer{Name: "v1", In: m.Trunk2, Out: m.Head, Src: LayerS2, ReLU: true}
	ls[LayerV2] = Layer{Name: "v2", In: m.Head, Out: m.Atoms, Src: LayerV1}
	for d, n := range market.BranchSizes {
		ls[LayerA1(d)] = Layer{Name: fmt.Sprintf("a1_%d", d), In: m.Trunk2, Out: m.Head, Src: LayerS2, ReLU: true}
		ls[LayerA2(d)] = Layer{Name: fmt.Sprintf("a2_%d", d), In: m.Head, Out: n * m.Atoms, Src: LayerA1(d)}
	}
	off := 0
	for i := range ls {
		ls[i].W = off
		off += ls[i].Out * ls[i].In
		ls[i].B = off
		off += ls[i].Out
	}
	return ls
}

// Layout returns the blocks of the flat parameter vector of model m, in
// order and without gaps: for each layer s1, s2, v1, v2, a1_0, a2_0, a1_1,
// a2_1, a1_2, a2_2 its weight (out×in, row-major) and then its bias (out).
// Rows of a2_d are action-major: row a·Atoms + j is action a, atom j. The
// layout is a contract shared by every backend and by Python readers of
// checkpoints; it never changes within a checkpoint format version.
//
// m is not validated; see Check.
func Layout(m config.ModelConfig) []Block {
	ls := Layers(m)
	blocks := make([]Block, 0, 2*NumLayers)
	for _, l := range ls {
		blocks = append(blocks,
			Block{Name: l.Name + ".weight", Offset: l.W, Rows: l.Out, Cols: l.In},
			Block{Name: l.Name + ".bias", Offset: l.B, Rows: l.Out, Cols: 1, Bias: true})
	}
	return blocks
}

// NumParams is the length of the flat parameter vector of model m:
// 286,385 for the default model.
func NumParams(m config.ModelConfig) int {
	ls := Layers(m)
	last := ls[NumLayers-1]
	return last.B + last.Out
}

// Check rejects a model the network cannot be built for, naming the field
// as RunConfig does. The limits are config.Validate's.
func Check(m config.ModelConfig) error {
	for _, f := range []struct {
		name   string
		v, min int
		max    int
	}{
		{"model.trunk1", m.Trunk1, 1, 16384},
		{"model.trunk2", m.Trunk2, 1, 16384},
		{"model.head", m.Head, 1, 16384},
		{"model.atoms", m.Atoms, 2, 1024},
	} {
		if f.v < f.min || f.v > f.max {
			return fmt.Errorf("%w: %s = %d: must be an integer in [%d, %d]", config.ErrInvalid, f.name, f.v, f.min, f.max)
		}
	}
	if math.IsNaN(m.VMin) || math.IsInf(m.VMin, 0) || m.VMin < -1e6 {
		return fmt.Errorf("%w: model.v_min = %g: must be in [-1e6, 1e6]", config.ErrInvalid, m.VMin)
	}
	if !(m.VMax > m.VMin) || m.VMax > 1e6 {
		return fmt.Errorf("%w: model.v_max = %g: must be greater than model.v_min (%g) and at most 1e6", config.ErrInvalid, m.VMax, m.VMin)
	}
	return nil
}

// Support returns the atoms' values z_j = v_min + j·Δz, Δz = (v_max −
// v_min)/(Atoms − 1), and Δz, v_min, v_max themselves: each computed in
// float64 and rounded once to float32.
func Support(m config.ModelConfig) (z []float32, dz, vmin, vmax float32) {
	step := (m.VMax - m.VMin) / float64(m.Atoms-1)
	z = make([]float32, m.Atoms)
	for j := range z {
		z[j] = float32(m.VMin + float64(j)*step)
	}
	return z, float32(step), float32(m.VMin), float32(m.VMax)
}
