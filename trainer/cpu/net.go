package cpu

import (
	"fmt"
	"runtime"

	"github.com/dqnflow/dqnflow/bf16"
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
// depend on it (see gemm).
const inferRows = 512

// Net is the network of DESIGN.md §3 with one set of parameters, as used
// for the online and the target network and for inference from a
// checkpoint. Its float32 parameters are the masters; the GEMMs read a copy
// of the weights (bf16-rounded in bf16-mixed mode) and its transpose, both
// refreshed whenever the masters change. A Net is not safe for concurrent
// use: it owns the scratch of its forward pass.
type Net struct {
	model     config.ModelConfig
	precision string
	mixed     bool // bf16-mixed: round GEMM operands to bf16
	workers   int  // goroutines per GEMM
	lay       [model.NumLayers]model.Layer
	params    []float32 // float32 masters, Layout order
	gemmW     []float32 // GEMM copy: bf16-rounded params (mixed) or params itself (fp32)
	gemmWT    []float32 // gemmW with each weight block transposed to in×out, for the forward GEMM
	support   []float32 // z_j = v_min + j·Δz
	dz        float32   // Δz = (v_max − v_min)/(Atoms − 1)
	vmin      float32   // v_min
	vmax      float32   // v_max
	mean      []float32 // Atoms: dueling mean of one branch
	q         []float32 // inferRows×model.NumActions: Greedy's Q values
	act       acts
}

// acts is the forward scratch of a Net for up to rows observations. h[i]
// is the output of layer i, rows×out_i: after bias, ReLU and (mixed) bf16
// rounding for the hidden layers, the raw affine output for v2 and a2_d.
type acts struct {
	rows int
	x    []float32 // rows×ObsDim: the observations as the s1 GEMM reads them
	h    [model.NumLayers][]float32
	logp []float32 // rows×model.NumActions×Atoms: log-softmax over atoms
	p    []float32 // rows×model.NumActions×Atoms: softmax over atoms
}

// checkPrecision accepts the modes this backend runs: fp32 and bf16-mixed.
func checkPrecision(precision string) error {
	switch precision {
	case config.PrecisionFP32, config.PrecisionBF16Mixed:
		return nil
	case config.PrecisionBF16:
		return fmt.Errorf("precision %s is not supported by the cpu backend (use %s or %s): %w",
			precision, config.PrecisionFP32, config.PrecisionBF16Mixed, ErrUnsupportedPrecision)
	}
	return fmt.Errorf("precision %q: must be %q, %q or %q: %w", precision,
		config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16, config.ErrInvalid)
}

// newNet builds a Net with zero parameters.
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
		mixed:     precision == config.PrecisionBF16Mixed,
		workers:   runtime.GOMAXPROCS(0),
		lay:       model.Layers(m),
		params:    make([]float32, model.NumParams(m)),
		gemmWT:    make([]float32, model.NumParams(m)),
		mean:      make([]float32, m.Atoms),
		q:         make([]float32, inferRows*model.NumActions),
	}
	n.gemmW = n.params
	if n.mixed {
		n.gemmW = make([]float32, len(n.params))
	}
	n.support, n.dz, n.vmin, n.vmax = model.Support(m)
	return n, nil
}

// NewNet builds a network for model m in the given precision mode with
// weights initialised from seed as PyTorch's nn.Linear default does (see
// Layout for the order): U(−1/√in, 1/√in) for weights and biases.
func NewNet(m config.ModelConfig, precision string, seed uint64) (*Net, error) {
	n, err := newNet(m, precision)
	if err != nil {
		return nil, err
	}
	model.InitParams(n.params, m, seed)
	n.refresh()
	return n, nil
}

// SetThreads sets the number of goroutines each GEMM may use; k ≤ 0
// means GOMAXPROCS, the default. Results do not depend on it.
func (n *Net) SetThreads(k int) {
	if k <= 0 {
		k = runtime.GOMAXPROCS(0)
	}
	n.workers = k
}

// Model returns the model n computes.
func (n *Net) Model() config.ModelConfig { return n.model }

// Precision returns the precision mode n runs in.
func (n *Net) Precision() string { return n.precision }

// Support returns a copy of the atoms' values (model.Support).
func (n *Net) Support() []float32 { return append([]float32(nil), n.support...) }

// Params returns a copy of the float32 parameters in Layout order.
func (n *Net) Params() []float32 { return append([]float32(nil), n.params...) }

// SetParams copies p (Layout order) into the parameters and refreshes the
// bf16 copy. p must have NumParams(model) finite values.
func (n *Net) SetParams(p []float32) error {
	if len(p) != len(n.params) {
		return fmt.Errorf("set params: got %d values, want %d", len(p), len(n.params))
	}
	if i := model.FirstNonFinite(p); i >= 0 {
		return fmt.Errorf("set params: value %d is %g: %w", i, p[i], model.ErrNotFinite)
	}
	copy(n.params, p)
	n.refresh()
	return nil
}

// refresh recomputes the GEMM copies of the weights after the masters
// changed: in bf16-mixed mode gemmW = bf16.Round(params) element-wise, and
// in every mode gemmWT holds each weight block of gemmW transposed
// (in×out), which the forward GEMM reads.
func (n *Net) refresh() {
	if n.mixed {
		for i, v := range n.params {
			n.gemmW[i] = bf16.Round(v)
		}
	}
	for _, l := range n.lay {
		w, wt := n.gemmW[l.W:l.B], n.gemmWT[l.W:l.B]
		for o := 0; o < l.Out; o++ {
			for i, x := range w[o*l.In : (o+1)*l.In] {
				wt[i*l.Out+o] = x
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
	a.x = make([]float32, rows*market.ObsDim)
	for i, l := range n.lay {
		a.h[i] = make([]float32, rows*l.Out)
	}
	a.logp = make([]float32, rows*model.NumActions*n.model.Atoms)
	a.p = make([]float32, rows*model.NumActions*n.model.Atoms)
}

// setInput copies rows observations into the first GEMM's operand, rounded
// to bf16 in bf16-mixed mode, starting at row first.
func (n *Net) setInput(first int, obs []float32) {
	x := n.act.x[first*market.ObsDim : first*market.ObsDim+len(obs)]
	copy(x, obs)
	if n.mixed {
		bf16.RoundSlice(x)
	}
}

// input returns the GEMM operand that layer i reads.
func (n *Net) input(i int) []float32 {
	if s := n.lay[i].Src; s >= 0 {
		return n.act.h[s]
	}
	return n.act.x
}

// forward runs the network on the first rows observations of the scratch
// (set by setInput), filling act.h, act.logp and act.p.
func (n *Net) forward(rows int) {
	for i := range n.lay {
		n.linear(i, rows)
	}
	n.head(rows)
}

// linear computes layer i for rows observations:
//
//	y = x·Wᵀ + b,   h = y (v2, a2_d)   or   h = max(y, 0) (hidden layers)
//
// with the GEMM on the transposed weight copy, x·(Wᵀ), so that each output
// is the float32 sum y[r,o] = Σ_i x[r,i]·W[o,i] taken in input order i
// (see gemm), and the bias from the float32 masters. In
// bf16-mixed mode a hidden layer's h is then rounded to bf16, because it is
// the operand of the next GEMM; the outputs of v2 and a2_d stay float32.
func (n *Net) linear(i, rows int) {
	l := &n.lay[i]
	out := n.act.h[i][:rows*l.Out]
	gemm(n.workers, false, rows, l.Out, l.In, n.input(i), l.In, n.gemmWT[l.W:l.B], l.Out, 0, out, l.Out)
	bias := n.params[l.B : l.B+l.Out]
	for r := 0; r < rows; r++ {
		y := out[r*l.Out : (r+1)*l.Out]
		for j, b := range bias {
			y[j] += b
		}
		if !l.ReLU {
			continue
		}
		for j, v := range y {
			if v < 0 {
				y[j] = 0
			}
		}
		if n.mixed {
			bf16.RoundSlice(y)
		}
	}
}

// head turns the value and advantage outputs into per-action distributions
// (Wang et al. 2016 dueling, per atom). For each observation, branch d with
// n_d actions, action a and atom j, in float32:
//
//	mean_j  = (Σ_a' A_d[a',j]) / n_d                 (sum in action order)
//	L[a,j]  = (V[j] + A_d[a,j]) − mean_j
//	logp_j  = (L_j − max_k L_k) − log Σ_k exp(L_k − max_k L_k)
//	p_j     = exp(L_j − max_k L_k) / Σ_k exp(L_k − max_k L_k)
//
// exp and log are math.Exp and math.Log of the float32 argument, rounded to
// float32.
func (n *Net) head(rows int) {
	atoms := n.model.Atoms
	n.logits(rows, n.act.logp)
	for o := 0; o < rows*model.NumActions*atoms; o += atoms {
		logSoftmax(n.act.logp[o:o+atoms], n.act.p[o:o+atoms])
	}
}

// logits writes the dueling logits L[a,j] of the first rows observations
// (rows×NumActions×Atoms, formulas at head) from the outputs of v2 and
// a2_d to dst.
func (n *Net) logits(rows int, dst []float32) {
	atoms := n.model.Atoms
	v2 := n.act.h[model.LayerV2]
	for r := 0; r < rows; r++ {
		v := v2[r*atoms : (r+1)*atoms]
		for d, nd := range market.BranchSizes {
			adv := n.act.h[model.LayerA2(d)][r*nd*atoms : (r+1)*nd*atoms]
			base := (r*model.NumActions + model.BranchOffset[d]) * atoms
			dueling(v, adv, nd, n.mean, dst[base:base+nd*atoms])
		}
	}
}

// dueling writes the logits L[a,j] = (V[j] + A[a,j]) − mean_a' A[a',j] of
// one branch with nd actions into dst (nd×atoms). mean is atoms scratch.
func dueling(v, adv []float32, nd int, mean, dst []float32) {
	atoms := len(v)
	copy(mean, adv[:atoms])
	for a := 1; a < nd; a++ {
		for j, x := range adv[a*atoms : (a+1)*atoms] {
			mean[j] += x
		}
	}
	count := float32(nd)
	for j := range mean {
		mean[j] /= count
	}
	for a := 0; a < nd; a++ {
		row := adv[a*atoms : (a+1)*atoms]
		out := dst[a*atoms : (a+1)*atoms]
		for j := range out {
			out[j] = (v[j] + row[j]) - mean[j]
		}
	}
}

// logSoftmax replaces the logits in l by their log-softmax and writes the
// softmax to p, subtracting the maximum first (formulas at head).
func logSoftmax(l, p []float32) {
	mx := l[0]
	for _, x := range l[1:] {
		if x > mx {
			mx = x
		}
	}
	var s float32
	for j, x := range l {
		e := exp32(x - mx)
		p[j] = e
		s += e
	}
	ls := log32(s)
	for j, x := range l {
		l[j] = (x - mx) - ls
		p[j] /= s
	}
}

// expected writes Q[k] = Σ_j p[k,j]·z_j (float32, in atom order) for each
// of the len(q) action distributions in p.
func expected(p, z, q []float32) {
	atoms := len(z)
	for k := range q {
		var s float32
		for j, x := range p[k*atoms : (k+1)*atoms] {
			s += float32(x * z[j])
		}
		q[k] = s
	}
}

// argmax returns the index of the first largest value of q.
func argmax(q []float32) int {
	best := 0
	for i, x := range q {
		if x > q[best] {
			best = i
		}
	}
	return best
}

// checkObs checks that obs holds rows observations.
func checkObs(what string, obs []float32, rows int) error {
	if rows < 0 {
		return fmt.Errorf("%s: n = %d: must not be negative", what, rows)
	}
	if len(obs) != rows*market.ObsDim {
		return fmt.Errorf("%s: obs has %d values, want n·ObsDim = %d·%d = %d", what, len(obs), rows, market.ObsDim, rows*market.ObsDim)
	}
	return nil
}

// QValues writes the expected value Q(s, a) = Σ_j p_j(s, a)·z_j of every
// branch action for the rows observations in obs (rows×ObsDim) to dst
// (rows×model.NumActions: direction 0..2, size 0..3, exit 0..2). A row's values
// do not depend on the other rows.
func (n *Net) QValues(obs []float32, rows int, dst []float32) error {
	if err := checkObs("q values", obs, rows); err != nil {
		return err
	}
	if len(dst) != rows*model.NumActions {
		return fmt.Errorf("q values: dst has %d values, want n·%d = %d", len(dst), model.NumActions, rows*model.NumActions)
	}
	for r0 := 0; r0 < rows; r0 += inferRows {
		k := min(inferRows, rows-r0)
		n.ensure(k)
		n.setInput(0, obs[r0*market.ObsDim:(r0+k)*market.ObsDim])
		n.forward(k)
		expected(n.act.p[:k*model.NumActions*n.model.Atoms], n.support, dst[r0*model.NumActions:(r0+k)*model.NumActions])
	}
	return nil
}

// Distributions writes the probabilities p_j(s, a) of every branch action
// and atom for the rows observations in obs to dst (rows×model.NumActions×Atoms,
// actions in QValues order, atoms innermost).
func (n *Net) Distributions(obs []float32, rows int, dst []float32) error {
	if err := checkObs("distributions", obs, rows); err != nil {
		return err
	}
	per := model.NumActions * n.model.Atoms
	if len(dst) != rows*per {
		return fmt.Errorf("distributions: dst has %d values, want n·%d·%d = %d", len(dst), model.NumActions, n.model.Atoms, rows*per)
	}
	for r0 := 0; r0 < rows; r0 += inferRows {
		k := min(inferRows, rows-r0)
		n.ensure(k)
		n.setInput(0, obs[r0*market.ObsDim:(r0+k)*market.ObsDim])
		n.forward(k)
		copy(dst[r0*per:(r0+k)*per], n.act.p[:k*per])
	}
	return nil
}

// Logits writes the dueling logits L_d[a, j] before the softmax (see head)
// of every branch action and atom for the rows observations in obs to dst
// (rows×NumActions×Atoms, in the layout of Distributions).
func (n *Net) Logits(obs []float32, rows int, dst []float32) error {
	if err := checkObs("logits", obs, rows); err != nil {
		return err
	}
	per := model.NumActions * n.model.Atoms
	if len(dst) != rows*per {
		return fmt.Errorf("logits: dst has %d values, want n·%d·%d = %d", len(dst), model.NumActions, n.model.Atoms, rows*per)
	}
	for r0 := 0; r0 < rows; r0 += inferRows {
		k := min(inferRows, rows-r0)
		n.ensure(k)
		n.setInput(0, obs[r0*market.ObsDim:(r0+k)*market.ObsDim])
		for i := range n.lay {
			n.linear(i, k)
		}
		n.logits(k, dst[r0*per:(r0+k)*per])
	}
	return nil
}

// Greedy writes, for each of the rows observations in obs, the action that
// maximises Q on every branch (the first one on ties) to dst.
func (n *Net) Greedy(obs []float32, rows int, dst []market.Action) error {
	if err := checkObs("greedy", obs, rows); err != nil {
		return err
	}
	if len(dst) != rows {
		return fmt.Errorf("greedy: dst has %d actions, want n = %d", len(dst), rows)
	}
	for r0 := 0; r0 < rows; r0 += inferRows {
		k := min(inferRows, rows-r0)
		q := n.q[:k*model.NumActions]
		if err := n.QValues(obs[r0*market.ObsDim:(r0+k)*market.ObsDim], k, q); err != nil {
			return err
		}
		for r := 0; r < k; r++ {
			qr := q[r*model.NumActions : (r+1)*model.NumActions]
			dst[r0+r] = market.Action{
				Dir:  argmax(qr[model.BranchOffset[0]:model.BranchOffset[1]]),
				Size: argmax(qr[model.BranchOffset[1]:model.BranchOffset[2]]),
				Exit: argmax(qr[model.BranchOffset[2]:]),
			}
		}
	}
	return nil
}
