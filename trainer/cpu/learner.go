package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/blas"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// StepResult is what Step reports.
type StepResult struct {
	// Loss is the batch loss (1/n)·Σ_i w_i·ℓ_i, computed in float32.
	Loss float64
	// GradNorm is the global L2 norm of the gradient before clipping.
	GradNorm float64
	// PerSample holds the unweighted loss ℓ_i of each sample, the new
	// replay priority before its exponent. It aliases the Learner's memory
	// and stays valid until the next call of Step or Gradient.
	PerSample []float32
}

// Learner is the CPU reference of one distributional, action-branching
// double-DQN learner: online and target networks, AdamW moments, the
// spectral-norm vectors and the scratch of a training step. Scratch grows
// to the largest batch seen and is then reused, so Step allocates no
// buffers in steady state (with one thread nothing at all, on every BLAS;
// with more, the goroutines of gonum's tiles and of the per-sample loops
// are a few dozen small objects per step). A Learner is not safe for
// concurrent use.
type Learner struct {
	online, target *Net
	opt            config.OptimConfig

	grad []float32    // ∂loss/∂params, Layout order
	m, v []float32    // AdamW moments
	step int64        // AdamW updates done
	seed uint64       // the run's seed: the stochastic rounding's bits (bf16.SRBits)
	stag []stagnation // per worker: the stagnation of the AdamW steps since ResetStagnation

	u      [model.NumLayers][]float32 // spectral-norm left vectors, out_i each
	svec   []float32                  // spectral scratch: max in
	swv    []float32                  // spectral scratch: max out
	sigma  [model.NumLayers]float64   // the step's σ per weight matrix, from powerStep
	rows   int                        // batch capacity of the scratch below
	tgt    []float32                  // rows×model.NumBranches×Atoms: projected targets m
	sample []float32                  // rows: per-sample loss
	g      [numLevels][]float32       // rows×width of each level: ∂loss/∂y, y the affine outputs of its layers
	scr    []scratch                  // per worker: the per-sample scratch
	gb     []float32                  // widest level: bias gradients of one GEMM group
	bg     *gemmGroup                 // the group groupBackward works on
	batch  *model.Batch               // the batch of the step in progress, for the parallel sections
	n      int                        // its samples

	// method values made once, so that parallel sections allocate nothing
	// with one thread
	targetsFn, headFn, adamFn, gradColsFn func(lo, hi, w int)
}

// checkOptim rejects optimiser settings Step cannot use, naming the field
// as RunConfig does.
func checkOptim(o config.OptimConfig) error {
	for _, f := range []struct {
		name string
		v    float64
		ok   bool
		want string
	}{
		{"optim.lr", o.LR, o.LR > 0 && o.LR < 1, "must be in (0, 1)"},
		{"optim.beta1", o.Beta1, o.Beta1 >= 0 && o.Beta1 < 1, "must be in [0, 1)"},
		{"optim.beta2", o.Beta2, o.Beta2 >= 0 && o.Beta2 < 1, "must be in [0, 1)"},
		{"optim.eps", o.Eps, o.Eps > 0 && o.Eps < 1, "must be in (0, 1)"},
		{"optim.weight_decay", o.WeightDecay, o.WeightDecay >= 0 && o.WeightDecay <= 1, "must be in [0, 1]"},
		{"optim.clip_norm", o.ClipNorm, o.ClipNorm >= 0 && o.ClipNorm <= 1e9, "must be in [0, 1e9]"},
		{"optim.spectral_bound", o.SpectralBound, o.SpectralBound >= 0 && o.SpectralBound <= 1e9, "must be in [0, 1e9]"},
	} {
		if !f.ok { // NaN fails every comparison
			return fmt.Errorf("%w: %s = %g: %s", config.ErrInvalid, f.name, f.v, f.want)
		}
	}
	return nil
}

// checkRounding rejects stochastic rounding outside precision bf16, as
// RunConfig.Validate does.
func checkRounding(o config.OptimConfig, precision string) error {
	if o.StochasticRounding && precision != config.PrecisionBF16 {
		return fmt.Errorf("%w: optim.stochastic_rounding = true: needs precision %q (got %q, whose float32 master weights are not rounded to bf16 by an update)",
			config.ErrInvalid, config.PrecisionBF16, precision)
	}
	return nil
}

// NewLearner builds a learner for model m and optimiser o in the given
// precision mode ("fp32", "bf16-mixed" or "bf16", see doc.go). The online
// network is initialised from seed (see NewNet), the target network is a
// copy of it, the AdamW moments and step are zero, and the spectral-norm
// vectors are model.InitSpectral(m, seed) (rounded to bf16 in bf16 mode).
// The seed also keys the stochastic rounding of bf16 mode.
func NewLearner(m config.ModelConfig, o config.OptimConfig, precision string, seed uint64) (*Learner, error) {
	if err := checkOptim(o); err != nil {
		return nil, err
	}
	if err := checkRounding(o, precision); err != nil {
		return nil, err
	}
	online, err := NewNet(m, precision, seed)
	if err != nil {
		return nil, err
	}
	target, err := newNet(m, precision)
	if err != nil {
		return nil, err
	}
	copy(target.params, online.params)
	target.refresh()
	l := newLearner(online, target, o)
	l.seed = seed
	l.u = model.InitSpectral(m, seed)
	l.storeState()
	return l, nil
}

// newLearner allocates the state around two networks of the same model.
func newLearner(online, target *Net, o config.OptimConfig) *Learner {
	np := len(online.params)
	l := &Learner{
		online: online, target: target, opt: o,
		grad: make([]float32, np),
		m:    make([]float32, np),
		v:    make([]float32, np),
	}
	l.targetsFn, l.headFn, l.adamFn, l.gradColsFn = l.targetRows, l.headRows, l.adamChunk, l.gradCols
	l.gb = make([]float32, slices.Max(online.width[:]))
	maxIn, maxOut := 0, 0
	for i, ly := range online.lay {
		l.u[i] = make([]float32, ly.Out)
		maxIn, maxOut = max(maxIn, ly.In), max(maxOut, ly.Out)
	}
	l.svec = make([]float32, maxIn)
	l.swv = make([]float32, maxOut)
	return l
}

// Online returns the online network. Changing its parameters (SetParams)
// changes the learner's.
func (l *Learner) Online() *Net { return l.online }

// Target returns the target network.
func (l *Learner) Target() *Net { return l.target }

// NumParams is the number of trainable parameters of one network.
func (l *Learner) NumParams() int { return len(l.online.params) }

// SetThreads sets the number of threads each GEMM may use; n ≤ 0 means
// GOMAXPROCS, the default. With gonum results do not depend on it; for
// OpenBLAS the count is process-wide (see Net.SetThreads).
func (l *Learner) SetThreads(n int) {
	l.online.SetThreads(n)
	l.target.SetThreads(n)
}

// SetBLAS makes both networks run their GEMMs on b (Net.SetBLAS).
func (l *Learner) SetBLAS(b blas.BLAS) {
	l.online.SetBLAS(b)
	l.target.SetBLAS(b)
}

// BLAS returns the implementation the GEMMs run on.
func (l *Learner) BLAS() blas.BLAS { return l.online.lib }

// Steps returns the number of AdamW updates done (the Adam step t).
func (l *Learner) Steps() int64 { return l.step }

// QValues writes the online network's expected Q values; see Net.QValues.
func (l *Learner) QValues(obs []float32, rows int, dst []float32) error {
	return l.online.QValues(obs, rows, dst)
}

// Greedy writes the online network's greedy actions; see Net.Greedy.
func (l *Learner) Greedy(obs []float32, rows int, dst []market.Action) error {
	return l.online.Greedy(obs, rows, dst)
}

// State copies the learner's state: parameters, AdamW moments and step,
// spectral-norm vectors.
func (l *Learner) State() *model.State {
	s := &model.State{
		Online: slices.Clone(l.online.params), Target: slices.Clone(l.target.params),
		AdamM: slices.Clone(l.m), AdamV: slices.Clone(l.v), Step: l.step,
	}
	for i := range l.u {
		s.U[i] = slices.Clone(l.u[i])
	}
	return s
}

// SetState replaces the learner's state by a copy of s, a valid state of
// the learner's model (model.State.Check; the error names the tensor), and
// refreshes the bf16 weights. On error the learner is unchanged.
func (l *Learner) SetState(s *model.State) error {
	if err := s.Check(l.online.model); err != nil {
		return err
	}
	copy(l.online.params, s.Online)
	copy(l.target.params, s.Target)
	copy(l.m, s.AdamM)
	copy(l.v, s.AdamV)
	l.step = s.Step
	for i := range s.U {
		copy(l.u[i], s.U[i])
	}
	l.storeState()
	l.online.refresh()
	l.target.refresh()
	return nil
}

// storeState rounds the whole state to bf16 in bf16 mode, where it is
// stored as bf16: parameters of both networks, moments and spectral
// vectors. A state saved in bf16 mode is unchanged by it.
func (l *Learner) storeState() {
	if !l.online.full {
		return
	}
	for _, x := range [][]float32{l.online.params, l.target.params, l.m, l.v} {
		bf16.RoundSlice(x)
	}
	for _, u := range l.u {
		bf16.RoundSlice(u)
	}
}

// SyncTarget moves the target network towards the online one, element by
// element in float32:
//
//	target ← τ·online + (1 − τ)·target,   τ in (0, 1]
//
// with τ and 1 − τ each rounded once to float32; τ = 1 copies exactly. In
// bf16 mode the result is stored rounded to the nearest bf16.
func (l *Learner) SyncTarget(tau float64) error {
	if !(tau > 0 && tau <= 1) {
		return fmt.Errorf("sync target: tau = %g: must be in (0, 1]", tau)
	}
	if tau == 1 {
		copy(l.target.params, l.online.params)
	} else {
		a, b := float32(tau), float32(1-tau)
		for i, o := range l.online.params {
			l.target.params[i] = float32(a*o) + float32(b*l.target.params[i])
		}
	}
	l.target.storeParams()
	l.target.refresh()
	return nil
}

// ensure grows the step scratch to rows samples.
func (l *Learner) ensure(rows int) {
	if rows > l.rows {
		l.rows = rows
		atoms := l.online.model.Atoms
		l.tgt = make([]float32, rows*model.NumBranches*atoms)
		l.sample = make([]float32, rows)
		for k := lvS1; k < numLevels; k++ {
			l.g[k] = make([]float32, rows*l.online.width[k])
		}
	}
	l.online.ensure(2 * rows)
	l.target.ensure(rows)
	for len(l.scr) < l.workers() {
		l.scr = append(l.scr, newScratch(l.online.model.Atoms, model.NumActions))
	}
}

// workers is the number of goroutines of the step's per-sample and
// per-parameter loops: the BLAS's thread count.
func (l *Learner) workers() int { return max(1, l.online.lib.Threads()) }

// Step runs one training step on b: forward, double-DQN C51 targets, loss,
// backward, global-norm clipping, AdamW, the spectral-norm bound and the
// refresh of the bf16 weights. An error from a bad batch leaves the learner
// unchanged; a non-finite loss or gradient norm returns an error wrapping
// trainer.ErrNonFinite, also before any parameter changes.
//
// The steps, with n = len(b.Return):
//
//  1. The online network runs on [Obs; NextObs] (2n rows), the target
//     network on NextObs. Softmaxes are taken only where needed: all
//     actions of the online network at s′, the taken actions at s, and the
//     chosen actions of the target network.
//  2. For each sample i and branch d the online network picks
//     a*_d = argmax_a Q_online(s′, a) (first on ties) and the target
//     distribution m_id is the projection (see project) of
//     p_target(s′, a*_d) for R_i and discount_i.
//  3. ℓ_i = (1/3)·Σ_d −Σ_j m_idj·log p_online(s, a_id)_j and
//     loss = (1/n)·Σ_i w_i·ℓ_i; see backward for the gradient.
//  4. ‖g‖₂ is summed in float64; if clip_norm > 0 and ‖g‖₂ > clip_norm,
//     g ← g·float32(clip_norm/‖g‖₂).
//  5. When spectral_bound > 0, one power iteration (see powerStep) on each
//     of the ten weight matrices as the gradient saw them, which advances u
//     and estimates σ; then AdamW (see adamW); then each matrix whose σ
//     exceeds the bound is scaled by float32(bound/σ) (boundScale). The
//     power iteration reads the weights before the update, so the GPU runs
//     it beside the forward and backward passes, off the step's critical
//     path (ADR 0025).
//
// In bf16 mode the gradient is rounded to bf16 after step 3 (so the norm,
// clipping and AdamW read bf16 values), AdamW stores moments and
// parameters as bf16 (storedAdamW; stochastically with
// optim.stochastic_rounding), and the spectral step stores its scaled
// weights and its vectors u rounded to the nearest bf16.
func (l *Learner) Step(b *model.Batch) (StepResult, error) {
	n, err := b.Check()
	if err != nil {
		return StepResult{}, err
	}
	loss := l.gradients(b, n)
	if !finite32(loss) {
		return StepResult{}, fmt.Errorf("step %d: loss is %g: %w", l.step+1, loss, trainer.ErrNonFinite)
	}
	norm := l2norm(l.grad)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return StepResult{}, fmt.Errorf("step %d: gradient norm is %g: %w", l.step+1, norm, trainer.ErrNonFinite)
	}
	if c := l.opt.ClipNorm; c > 0 && norm > c {
		scale(l.grad, float32(c/norm))
	}
	bound := l.opt.SpectralBound
	if bound > 0 {
		for i, ly := range l.online.lay {
			l.sigma[i] = powerStep(l.online.params[ly.W:ly.B], ly.Out, ly.In, l.u[i], l.svec[:ly.In], l.swv[:ly.Out])
			if l.online.full {
				bf16.RoundSlice(l.u[i])
			}
		}
	}
	l.step++
	l.applyAdamW()
	if bound > 0 {
		for i, ly := range l.online.lay {
			w := l.online.params[ly.W:ly.B]
			if boundScale(w, l.sigma[i], bound) && l.online.full {
				bf16.RoundSlice(w)
			}
		}
	}
	l.online.refresh()
	return StepResult{Loss: float64(loss), GradNorm: norm, PerSample: l.sample[:n]}, nil
}

// applyAdamW runs AdamW step l.step on every layer, with weight decay on
// the weight matrices and none on the biases.
func (l *Learner) applyAdamW() {
	for len(l.stag) < l.workers() {
		l.stag = append(l.stag, stagnation{})
	}
	parallel(l.workers(), l.workers(), l.adamFn)
}

// adamChunk runs AdamW on chunk w of every block: element-wise, so the
// split does not change a bit. Worker w adds its stagnation counts to
// l.stag[w].
func (l *Learner) adamChunk(_, _, w int) {
	p, k := l.online.params, l.workers()
	st := store{full: l.online.full, sr: l.opt.StochasticRounding, seed: l.seed}
	for _, ly := range l.online.lay {
		for _, blk := range [2]struct {
			from, to int
			decay    float64
		}{{ly.W, ly.B, l.opt.WeightDecay}, {ly.B, ly.B + ly.Out, 0}} {
			size := blk.to - blk.from
			a, e := blk.from+w*size/k, blk.from+(w+1)*size/k
			st.first = a
			l.stag[w].add(storedAdamW(p[a:e], l.grad[a:e], l.m[a:e], l.v[a:e], l.step, l.opt, blk.decay, st))
		}
	}
}

// Gradient computes steps 1–3 of Step on b, writing ∂loss/∂θ of the
// online parameters θ (Layout order, before clipping) to dst, and changes
// no parameter. The result's Loss, GradNorm (of dst) and PerSample are
// those Step would report. It exists to compare backends gradient by
// gradient.
func (l *Learner) Gradient(b *model.Batch, dst []float32) (StepResult, error) {
	if len(dst) != len(l.grad) {
		return StepResult{}, fmt.Errorf("gradient: dst has %d values, want NumParams = %d", len(dst), len(l.grad))
	}
	n, err := b.Check()
	if err != nil {
		return StepResult{}, err
	}
	loss := l.gradients(b, n)
	copy(dst, l.grad)
	return StepResult{Loss: float64(loss), GradNorm: l2norm(dst), PerSample: l.sample[:n]}, nil
}

// Targets computes steps 1–2 of Step on b, writing the projected targets
// m_id (n×NumBranches×Atoms, sample-major, atoms innermost) to dst, and
// changes no parameter. It exists to compare backends.
func (l *Learner) Targets(b *model.Batch, dst []float32) error {
	n, err := b.Check()
	if err != nil {
		return err
	}
	size := n * model.NumBranches * l.online.model.Atoms
	if len(dst) != size {
		return fmt.Errorf("targets: dst has %d values, want n·%d·%d = %d", len(dst), model.NumBranches, l.online.model.Atoms, size)
	}
	l.targets(b, n)
	copy(dst, l.tgt[:size])
	return nil
}

// gradients runs steps 1–3 of Step on a checked batch of n samples: it
// fills l.grad and l.sample and returns the loss. The parameters do not
// change.
func (l *Learner) gradients(b *model.Batch, n int) float32 {
	l.targets(b, n)
	loss := l.backward(b, n)
	if l.online.full {
		bf16.RoundSlice(l.grad)
	}
	return loss
}

// Stagnation returns the share of the parameter updates of the AdamW
// steps since the last ResetStagnation that were absorbed by the rounding
// of the stored parameter (see storedAdamW), and the number of updates
// that share is of; 0, 0 before any step.
func (l *Learner) Stagnation() (share float64, updates int64) {
	var c stagnation
	for _, s := range l.stag {
		c.add(s)
	}
	if c.moved == 0 {
		return 0, 0
	}
	return float64(c.stuck) / float64(c.moved), c.moved
}

// ResetStagnation starts a new count for Stagnation.
func (l *Learner) ResetStagnation() { clear(l.stag) }

// targets runs steps 1–2 of Step on a checked batch of n samples: the
// forward passes, which backward reads, and the projected targets in
// l.tgt.
func (l *Learner) targets(b *model.Batch, n int) {
	l.ensure(n)
	on, tg := l.online, l.target
	on.setInput(0, b.Obs)
	on.setInput(n, b.NextObs)
	on.linears(2 * n)
	tg.setInput(0, b.NextObs)
	tg.linears(n)

	l.batch, l.n = b, n
	parallel(l.workers(), n, l.targetsFn)
	l.batch = nil // the caller's batch is not kept
}

// targetRows computes the projected targets of samples lo…hi−1 (step 2 of
// Step) with worker w's scratch.
func (l *Learner) targetRows(lo, hi, w int) {
	on, tg, b, n, s := l.online, l.target, l.batch, l.n, &l.scr[w]
	atoms := on.model.Atoms
	clear(l.tgt[lo*model.NumBranches*atoms : hi*model.NumBranches*atoms])
	for i := lo; i < hi; i++ {
		on.rowQ(n+i, s.nextQ, s)
		for d, nd := range market.BranchSizes {
			off := model.BranchOffset[d]
			tg.actionDist(i, d, model.Argmax(s.nextQ[off:off+nd]), s)
			m := l.tgt[(i*model.NumBranches+d)*atoms : (i*model.NumBranches+d+1)*atoms]
			project(s.prob, on.support, b.Return[i], b.Discount[i], on.vmin, on.vmax, on.dz, m)
		}
	}
}
