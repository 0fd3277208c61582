package cpu

import (
	"fmt"
	"runtime"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/blas"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// ErrUnsupportedPrecision is wrapped by the error for a precision mode that
// this backend does not run.
var ErrUnsupportedPrecision = fmt.Errorf("unsupported precision (%w)", trainer.ErrUnsupported)

// inferRows is the number of observations QValues, Distributions and Greedy push through
// the network at once, which bounds their scratch memory. Results do not
// depend on it (see blas.Gonum.Sgemm).
const inferRows = 512

// Activation levels: the network's layers in depth order. The layers of
// one level are stored side by side as column blocks of one rows×width
// matrix, so that the four heads' hidden layers, which read the same input,
// are one GEMM, and the four output layers write one matrix:
//
//	lvObs     observation                          ObsDim
//	lvS1      s1                                   Trunk1
//	lvS2      s2                                   Trunk2
//	lvHidden  v1 | a1_0 | a1_1 | a1_2              4·Head
//	lvOut     v2 | a2_0 | a2_1 | a2_2              Atoms·(1 + NumActions)
const (
	lvObs = iota
	lvS1
	lvS2
	lvHidden
	lvOut
	numLevels
)

// gemmGroup is one GEMM of the forward pass: the layers of one level that
// read the same input columns, their weights stacked as row blocks.
type gemmGroup struct {
	layers         []int // model layer indices, in output column order
	level, col     int   // output level and first column
	srcLvl, srcCol int   // input level and first column
	in, out        int   // inputs; outputs summed over the layers
	w              int   // offset of the stacked weight in gw and gwt
}

// Net is the network of DESIGN.md §3 with one set of parameters, as used
// for the online and the target network and for inference from a
// checkpoint. Its float32 parameters are the masters; the GEMMs read packed
// copies of the weights (bf16-rounded in bf16-mixed mode), refreshed
// whenever the masters change. A Net is not safe for concurrent use: it
// owns the scratch of its forward pass.
type Net struct {
	model     config.ModelConfig
	precision string
	mixed     bool      // bf16-mixed or bf16: round GEMM operands to bf16
	full      bool      // bf16: the parameters themselves are bf16 values
	lib       blas.BLAS // runs the GEMMs
	seq       bool      // lib sums in index order (gonum): the forward GEMM reads gwt
	lay       [model.NumLayers]model.Layer
	groups    []gemmGroup
	width     [numLevels]int       // columns of each level
	place     [model.NumLayers]int // first column of each layer's output in its level
	params    []float32            // float32 masters, Layout order
	gw        []float32            // per group: the stacked weight, out×in (bf16-rounded in mixed mode)
	gwt       []float32            // per group: gw transposed, in×out (seq only)
	bias      [numLevels][]float32
	support   []float32 // z_j = v_min + j·Δz
	dz        float32   // Δz = (v_max − v_min)/(Atoms − 1)
	vmin      float32   // v_min
	vmax      float32   // v_max
	mean      []float32 // Atoms: dueling mean of one branch
	q         []float32 // inferRows×model.NumActions: Greedy's Q values
	margin    float32   // Greedy's margin for a position over flat (SetGreedyMargin)
	act       acts

	// the group being computed, for biasFn (a method value made once, so
	// that parallel sections allocate nothing with one thread)
	g      *gemmGroup
	y      []float32
	ldy    int
	biasFn func(lo, hi, w int)
}

// acts is the forward scratch of a Net for up to rows observations. lv[k]
// is level k, rows×width[k]: the observation as the s1 GEMM reads it, then
// after bias, ReLU and (mixed) bf16 rounding for the hidden layers, the raw
// affine output for v2 and a2_d.
type acts struct {
	rows int
	lv   [numLevels][]float32
	logp []float32 // rows×model.NumActions×Atoms: log-softmax over atoms
	p    []float32 // rows×model.NumActions×Atoms: softmax over atoms
}

// checkPrecision accepts the modes this backend runs: fp32, bf16-mixed and
// the emulation of bf16.
func checkPrecision(precision string) error {
	switch precision {
	case config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16:
		return nil
	}
	return fmt.Errorf("precision %q: must be %q, %q or %q: %w", precision,
		config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16, config.ErrInvalid)
}

// newNet builds a Net with zero parameters on gonum.
func newNet(m config.ModelConfig, precision string) (*Net, error) {
	if err := model.Check(m); err != nil {
		return nil, err
	}
	if err := checkPrecision(precision); err != nil {
		return nil, err
	}
	n := &Net{
		model:     m,
		precision: precision,
		mixed:     precision != config.PrecisionFP32,
		full:      precision == config.PrecisionBF16,
		lay:       model.Layers(m),
		params:    make([]float32, model.NumParams(m)),
		gw:        make([]float32, model.NumParams(m)),
		mean:      make([]float32, m.Atoms),
		q:         make([]float32, inferRows*model.NumActions),
	}
	n.support, n.dz, n.vmin, n.vmax = model.Support(m)
	n.biasFn = n.biasReLU
	n.plan()
	n.setBLAS(blas.Gonum{Workers: runtime.GOMAXPROCS(0)})
	return n, nil
}

// maxBranch is the largest number of actions of a branch.
func maxBranch() int {
	k := 0
	for _, nd := range market.BranchSizes {
		k = max(k, nd)
	}
	return k
}

// plan lays the layers out in levels and GEMM groups (see lvObs).
func (n *Net) plan() {
	level := [model.NumLayers]int{model.LayerS1: lvS1, model.LayerS2: lvS2, model.LayerV1: lvHidden, model.LayerV2: lvOut}
	for d := range market.BranchSizes {
		level[model.LayerA1(d)], level[model.LayerA2(d)] = lvHidden, lvOut
	}
	n.width[lvObs] = market.ObsDim
	order := []int{model.LayerS1, model.LayerS2, model.LayerV1, model.LayerA1(0), model.LayerA1(1), model.LayerA1(2),
		model.LayerV2, model.LayerA2(0), model.LayerA2(1), model.LayerA2(2)}
	for _, i := range order {
		n.place[i] = n.width[level[i]]
		n.width[level[i]] += n.lay[i].Out
	}
	n.groups = n.groups[:0]
	w := 0
	for _, i := range order {
		l := n.lay[i]
		srcLvl, srcCol := lvObs, 0
		if l.Src >= 0 {
			srcLvl, srcCol = level[l.Src], n.place[l.Src]
		}
		if k := len(n.groups) - 1; k >= 0 {
			g := &n.groups[k]
			if g.level == level[i] && g.srcLvl == srcLvl && g.srcCol == srcCol {
				g.layers = append(g.layers, i)
				g.out += l.Out
				w += l.Out * l.In
				continue
			}
		}
		n.groups = append(n.groups, gemmGroup{layers: []int{i}, level: level[i], col: n.place[i],
			srcLvl: srcLvl, srcCol: srcCol, in: l.In, out: l.Out, w: w})
		w += l.Out * l.In
	}
	for k := lvS1; k < numLevels; k++ {
		n.bias[k] = make([]float32, n.width[k])
	}
}

// NewNet builds a network for model m in the given precision mode with
// weights initialised from seed as PyTorch's nn.Linear default does (see
// Layout for the order): U(−1/√in, 1/√in) for weights and biases, rounded
// to bf16 in bf16 mode. Its GEMMs run on gonum until SetBLAS.
func NewNet(m config.ModelConfig, precision string, seed uint64) (*Net, error) {
	n, err := newNet(m, precision)
	if err != nil {
		return nil, err
	}
	model.InitParams(n.params, m, seed)
	n.storeParams()
	n.refresh()
	return n, nil
}

// SetBLAS makes n run its GEMMs on b. With gonum (b.SequentialSums) every
// GEMM output is the float32 sum of its products in index order, so results
// are the same on every machine; with an optimised BLAS they are the same
// from run to run on one machine, library and thread count.
func (n *Net) SetBLAS(b blas.BLAS) {
	n.setBLAS(b)
	n.refresh()
}

func (n *Net) setBLAS(b blas.BLAS) {
	n.lib, n.seq = b, b.SequentialSums()
	if n.seq && n.gwt == nil {
		n.gwt = make([]float32, len(n.gw))
	}
}

// BLAS returns the implementation n's GEMMs run on.
func (n *Net) BLAS() blas.BLAS { return n.lib }

// SetGreedyMargin sets the margin by which Greedy needs a position's
// expected Q to beat flat's (model.Greedy); a new Net has 0, the plain
// argmax. margin must be finite and not negative.
func (n *Net) SetGreedyMargin(margin float32) error {
	if err := model.CheckMargin(margin); err != nil {
		return err
	}
	n.margin = margin
	return nil
}

// GreedyMargin is the margin set by SetGreedyMargin.
func (n *Net) GreedyMargin() float32 { return n.margin }

// SetThreads sets the number of threads each GEMM may use; k ≤ 0 means
// GOMAXPROCS, the default. With gonum results do not depend on it. For
// OpenBLAS the count is process-wide.
func (n *Net) SetThreads(k int) {
	n.lib = n.lib.WithThreads(k)
}

// Model returns the model n computes.
func (n *Net) Model() config.ModelConfig { return n.model }

// Precision returns the precision mode n runs in.
func (n *Net) Precision() string { return n.precision }

// Support returns a copy of the atoms' values (model.Support).
func (n *Net) Support() []float32 { return append([]float32(nil), n.support...) }

// Params returns a copy of the float32 parameters in Layout order.
func (n *Net) Params() []float32 { return append([]float32(nil), n.params...) }

// SetParams copies p (Layout order) into the parameters (rounded to bf16
// in bf16 mode) and refreshes the bf16 copy. p must have NumParams(model)
// finite values.
func (n *Net) SetParams(p []float32) error {
	if len(p) != len(n.params) {
		return fmt.Errorf("set params: got %d values, want %d", len(p), len(n.params))
	}
	if i := model.FirstNonFinite(p); i >= 0 {
		return fmt.Errorf("set params: value %d is %g: %w", i, p[i], model.ErrNotFinite)
	}
	copy(n.params, p)
	n.storeParams()
	n.refresh()
	return nil
}

// storeParams rounds the parameters to bf16 in bf16 mode, where they are
// stored as bf16 (doc.go); in the other modes they are float32 masters.
func (n *Net) storeParams() {
	if n.full {
		bf16.RoundSlice(n.params)
	}
}

// refresh recomputes the GEMM copies of the weights after the masters
// changed: per group the stacked weight gw (out×in), bf16.Round(params)
// element-wise in bf16-mixed mode, and with a sequential-sum BLAS its
// transpose gwt (in×out), which the forward GEMM reads; and the packed
// biases of each level.
func (n *Net) refresh() {
	for gi := range n.groups {
		g := &n.groups[gi]
		dst := n.gw[g.w : g.w+g.out*g.in]
		r0 := 0
		for _, i := range g.layers {
			l := n.lay[i]
			blk := dst[r0*g.in : (r0+l.Out)*g.in]
			copy(blk, n.params[l.W:l.B])
			if n.mixed {
				bf16.RoundSlice(blk)
			}
			copy(n.bias[g.level][n.place[i]:n.place[i]+l.Out], n.params[l.B:l.B+l.Out])
			r0 += l.Out
		}
		if n.seq {
			wt := n.gwt[g.w : g.w+g.out*g.in]
			for o := 0; o < g.out; o++ {
				for i, x := range dst[o*g.in : (o+1)*g.in] {
					wt[i*g.out+o] = x
				}
			}
		}
	}
}

// ensure grows the forward scratch to hold rows observations. It allocates
// only when rows exceeds every earlier request.
func (n *Net) ensure(rows int) {
	if rows <= n.act.rows {
		return
	}
	a := &n.act
	a.rows = rows
	for k := range a.lv {
		a.lv[k] = make([]float32, rows*n.width[k])
	}
	a.logp = make([]float32, rows*model.NumActions*n.model.Atoms)
	a.p = make([]float32, rows*model.NumActions*n.model.Atoms)
}

// setInput copies rows observations into the first GEMM's operand, rounded
// to bf16 in bf16-mixed mode, starting at row first.
func (n *Net) setInput(first int, obs []float32) {
	x := n.act.lv[lvObs][first*market.ObsDim : first*market.ObsDim+len(obs)]
	copy(x, obs)
	if n.mixed {
		bf16.RoundSlice(x)
	}
}

// forward runs the network on the first rows observations of the scratch
// (set by setInput), filling every level, act.logp and act.p.
func (n *Net) forward(rows int) {
	n.linears(rows)
	n.head(rows)
}

// linears runs the GEMM groups on rows observations, filling every level.
func (n *Net) linears(rows int) {
	for gi := range n.groups {
		n.linear(&n.groups[gi], rows)
	}
}

// linear computes the layers of group g for rows observations:
//
//	y = x·Wᵀ + b,   h = y (v2, a2_d)   or   h = max(y, 0) (hidden layers, Go's max: NaN stays NaN)
//
// with one GEMM for the group's stacked W, so that each output is the
// float32 sum y[r,o] = Σ_i x[r,i]·W[o,i] (taken in input order i with
// gonum, on the transposed copy, see blas.Gonum.Sgemm), and the bias from
// the float32 masters. In bf16-mixed mode a hidden layer's h is then
// rounded to bf16, because it is the operand of the next GEMM; the outputs
// of v2 and a2_d stay float32.
func (n *Net) linear(g *gemmGroup, rows int) {
	x, ldx := n.act.lv[g.srcLvl][g.srcCol:], n.width[g.srcLvl]
	y, ldy := n.act.lv[g.level][g.col:], n.width[g.level]
	if n.seq {
		n.lib.Sgemm(false, false, rows, g.out, g.in, x, ldx, n.gwt[g.w:], g.out, 0, y, ldy)
	} else {
		n.lib.Sgemm(false, true, rows, g.out, g.in, x, ldx, n.gw[g.w:], g.in, 0, y, ldy)
	}
	n.g, n.y, n.ldy = g, y, ldy
	parallel(n.lib.Threads(), rows, n.biasFn)
}

// biasReLU adds the bias of group n.g to rows lo…hi−1 of its output and,
// for hidden layers, applies the ReLU and (mixed) the bf16 rounding.
func (n *Net) biasReLU(lo, hi, _ int) {
	g, y, ldy := n.g, n.y, n.ldy
	bias := n.bias[g.level][g.col : g.col+g.out]
	relu := g.level != lvOut
	for r := lo; r < hi; r++ {
		yr := y[r*ldy : r*ldy+g.out]
		yr = yr[:len(bias)]
		if !relu {
			for j, b := range bias {
				yr[j] += b
			}
			continue
		}
		for j, b := range bias {
			yr[j] = max(yr[j]+b, 0) // branch-free; NaN stays NaN, −0 becomes +0
		}
		if n.mixed {
			bf16.RoundSlice(yr)
		}
	}
}
