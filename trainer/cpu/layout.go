package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// NumLayers is the number of linear layers, and so of weight matrices, of
// the network: s1, s2, v1, v2 and a1_d, a2_d for the three branches.
const NumLayers = 10

// NumBranches is the number of action branches (direction, size, exit).
const NumBranches = 3

// NumActions is the number of branch actions over all branches (3+4+3).
// QValues writes this many values per observation, branch after branch.
const NumActions = market.NumDirections + market.NumSizes + market.NumExits

// branchOffset[d] is the index of branch d's first action among the
// NumActions branch actions.
var branchOffset = [NumBranches]int{0, market.NumDirections, market.NumDirections + market.NumSizes}

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

// layer is one linear layer y = x·Wᵀ + b with W at params[w:w+out·in] and b
// at params[b:b+out]. src is the layer whose output is its input, or -1 for
// the observation.
type layer struct {
	name    string
	in, out int
	w, b    int
	src     int
	relu    bool
}

// Layer indices, in layout order.
const (
	layerS1 = 0
	layerS2 = 1
	layerV1 = 2
	layerV2 = 3
)

// layerA1 is the index of branch d's hidden advantage layer a1_d.
func layerA1(d int) int { return 4 + 2*d }

// layerA2 is the index of branch d's advantage output layer a2_d.
func layerA2(d int) int { return 5 + 2*d }

// layers returns the ten layers of m in layout order:
//
//	s1   ObsDim → Trunk1, ReLU
//	s2   Trunk1 → Trunk2, ReLU
//	v1   Trunk2 → Head, ReLU
//	v2   Head → Atoms
//	a1_d Trunk2 → Head, ReLU            for d = 0, 1, 2
//	a2_d Head → n_d·Atoms               (row a·Atoms + j: action a, atom j)
//
// with a1_0, a2_0, a1_1, a2_1, a1_2, a2_2 interleaved in that order.
func layers(m config.ModelConfig) [NumLayers]layer {
	var ls [NumLayers]layer
	ls[layerS1] = layer{name: "s1", in: market.ObsDim, out: m.Trunk1, src: -1, relu: true}
	ls[layerS2] = layer{name: "s2", in: m.Trunk1, out: m.Trunk2, src: layerS1, relu: true}
	ls[layerV1] = layer{name: "v1", in: m.Trunk2, out: m.Head, src: layerS2, relu: true}
	ls[layerV2] = layer{name: "v2", in: m.Head, out: m.Atoms, src: layerV1}
	for d, n := range market.BranchSizes {
		ls[layerA1(d)] = layer{name: fmt.Sprintf("a1_%d", d), in: m.Trunk2, out: m.Head, src: layerS2, relu: true}
		ls[layerA2(d)] = layer{name: fmt.Sprintf("a2_%d", d), in: m.Head, out: n * m.Atoms, src: layerA1(d)}
	}
	off := 0
	for i := range ls {
		ls[i].w = off
		off += ls[i].out * ls[i].in
		ls[i].b = off
		off += ls[i].out
	}
	return ls
}

// Layout returns the blocks of the flat parameter vector of model m, in
// order and without gaps: for each layer s1, s2, v1, v2, a1_0, a2_0, a1_1,
// a2_1, a1_2, a2_2 its weight (out×in, row-major) and then its bias (out).
// Rows of a2_d are action-major: row a·Atoms + j is action a, atom j. The
// layout is a contract shared with the GPU backend and with Python readers
// of checkpoints; it never changes within a checkpoint format version.
//
// m is not validated; NewNet and NewLearner reject a bad model.
func Layout(m config.ModelConfig) []Block {
	ls := layers(m)
	blocks := make([]Block, 0, 2*NumLayers)
	for _, l := range ls {
		blocks = append(blocks,
			Block{Name: l.name + ".weight", Offset: l.w, Rows: l.out, Cols: l.in},
			Block{Name: l.name + ".bias", Offset: l.b, Rows: l.out, Cols: 1, Bias: true})
	}
	return blocks
}

// NumParams is the length of the flat parameter vector of model m:
// 286,385 for the default model.
func NumParams(m config.ModelConfig) int {
	ls := layers(m)
	last := ls[NumLayers-1]
	return last.b + last.out
}

// checkModel rejects a model the network cannot be built for, naming the
// field as RunConfig does. The limits are config.Validate's.
func checkModel(m config.ModelConfig) error {
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

// Random streams of rand.NewPCG(seed, stream): one for the weights, one
// for the spectral-norm vectors, so that either can change without moving
// the other.
const (
	streamInit     = 0x6471_6e66_6c6f_7701 // "dqnflow" + 1
	streamSpectral = 0x6471_6e66_6c6f_7702
)

// initParams fills p (laid out as Layout(m)) with PyTorch's default
// nn.Linear initialisation: every weight and bias of a layer with in inputs
// is drawn from U(−k, k), k = 1/√in. The draws come from
// rand.NewPCG(seed, streamInit) in layout order, block by block and element
// by element in memory order, each value computed from one 64-bit output x
// as float32((2·(x≫11)·2⁻⁵³ − 1)·k), so that another implementation of
// PCG-DXSM can reproduce it.
func initParams(p []float32, m config.ModelConfig, seed uint64) {
	r := rand.NewPCG(seed, streamInit)
	for _, l := range layers(m) {
		k := 1 / math.Sqrt(float64(l.in))
		for i := l.w; i < l.b+l.out; i++ {
			p[i] = float32((2*unitFloat(r.Uint64()) - 1) * k)
		}
	}
}

// unitFloat maps a 64-bit random value to [0, 1) with 53 bits: (x≫11)·2⁻⁵³.
func unitFloat(x uint64) float64 { return float64(x>>11) * (1.0 / (1 << 53)) }
