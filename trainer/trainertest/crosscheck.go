package trainertest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// CrossCheckSeed seeds every random draw of Compare: the weights, moments,
// spectral vectors and batches loaded into both learners.
const CrossCheckSeed = 0x63726f73 // "cros"

// Comparison is one quantity, or one parameter block of it, compared by
// Compare.
type Comparison struct {
	Quantity string  // "logits", "gradient", "adam.m", …
	Block    string  // parameter block, layer or branch; "" for the whole quantity
	Err      float64 // ‖got − ref‖₂/‖ref‖₂ (‖got − ref‖₂ when ref is zero)
	Tol      float64 // the tolerance it must meet
	RefNorm  float64 // ‖ref‖₂
}

// OK reports whether the error is within the tolerance (NaN is not).
func (c Comparison) OK() bool { return c.Err <= c.Tol }

func (c Comparison) String() string {
	name := c.Quantity
	if c.Block != "" {
		name += " " + c.Block
	}
	verdict := "ok"
	if !c.OK() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%-34s rel. error %-10.3g tolerance %-8.3g ‖ref‖ %-10.4g %s", name, c.Err, c.Tol, c.RefNorm, verdict)
}

// Report is the result of Compare: every comparison, in the order made.
type Report struct {
	Comparisons []Comparison
}

// Failures returns the comparisons over their tolerance.
func (r *Report) Failures() []Comparison {
	var out []Comparison
	for _, c := range r.Comparisons {
		if !c.OK() {
			out = append(out, c)
		}
	}
	return out
}

// Max returns the largest error of quantity q over its blocks.
func (r *Report) Max(q string) float64 {
	m := 0.0
	for _, c := range r.Comparisons {
		if c.Quantity == q && (c.Err > m || math.IsNaN(c.Err)) {
			m = c.Err
		}
	}
	return m
}

// String lists every comparison, one per line.
func (r *Report) String() string {
	var b strings.Builder
	for _, c := range r.Comparisons {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// add compares got with ref norm-wise, in float64.
func (r *Report) add(quantity, block string, got, ref []float32, tol float64) {
	var d, n float64
	for i := range ref {
		e := float64(got[i]) - float64(ref[i])
		d += e * e
		n += float64(ref[i]) * float64(ref[i])
	}
	r.addNorms(quantity, block, math.Sqrt(d), math.Sqrt(n), tol)
}

// addScalar compares two scalars.
func (r *Report) addScalar(quantity string, got, ref, tol float64) {
	r.addNorms(quantity, "", math.Abs(got-ref), math.Abs(ref), tol)
}

func (r *Report) addNorms(quantity, block string, diff, norm, tol float64) {
	e := diff
	if norm > 0 {
		e = diff / norm
	}
	r.Comparisons = append(r.Comparisons, Comparison{Quantity: quantity, Block: block, Err: e, Tol: tol, RefNorm: norm})
}

// CrossCheck runs Compare and fails t for every comparison over its
// tolerance, naming the quantity, the block, the error and the tolerance.
// The whole report is logged (go test -v shows it).
func CrossCheck(t *testing.T, ref, got StepLearner, cfg config.RunConfig, tol Tolerances) {
	t.Helper()
	rep, err := Compare(ref, got, cfg, tol)
	if err != nil {
		t.Fatalf("cross-check: %v", err)
	}
	t.Logf("cross-check of %d comparisons (relative, norm-wise):\n%s", len(rep.Comparisons), rep.String())
	for _, c := range rep.Failures() {
		t.Errorf("cross-check: %s", c)
	}
}

// Compare loads the same random state into ref and got and compares, for
// model cfg.Model and optimiser cfg.Optim (both learners must have been
// built with them) and batches of cfg.BatchSize samples drawn from
// CrossCheckSeed:
//
//  1. the state round trip SetState → State (exact);
//  2. the online network's dueling logits and probabilities on the batch's
//     s and s′, per branch (tol.Logits);
//  3. the projected C51 targets, per branch (tol.Targets);
//  4. Gradient: the loss and per-sample losses (tol.Loss) and the gradient
//     of every Layout block (tol.Grad);
//  5. Step from a state whose weight matrices all have spectral norm at
//     most half the bound, so AdamW alone moves them: loss, gradient norm,
//     the moments and the update p_new − p_old of every block (tol.Adam),
//     the spectral vectors u (tol.Spectral) and the step count (exact);
//  6. when optim.spectral_bound > 0, Step from a state whose matrices have
//     spectral norm 3× the bound, so the bound scales them: the update of
//     every weight block and u (tol.Spectral);
//  7. SyncTarget(τ = optim.target_tau, or 0.5 when that is 1): the target
//     network per block (tol.Sync);
//  8. in precision bf16, that got's gradient, its state after each step and
//     its target after the sync hold bf16 values only (quantity "bf16
//     values", tolerance 0).
//
// The double-DQN target picks each branch's argmax of the online Q at s′;
// a near-tie there would make both backends right and their targets
// different. So the batch keeps only next states whose two best actions
// differ, in the reference's Q, by at least 1% of the support's width
// (50% wider margins are used if too few states qualify), and Compare
// reports, as the quantity "argmax", the fraction of samples where got's
// online Q picks another action.
//
// In precision bf16 every state loaded into both learners is first
// rounded to bfloat16, the values bf16 storage holds, so the round trip
// of step 1 stays exact.
//
// An error is returned when a learner fails a call or returns a slice of
// the wrong length; errors beyond tolerance are in the report.
func Compare(ref, got StepLearner, cfg config.RunConfig, tol Tolerances) (*Report, error) {
	m, o := cfg.Model, cfg.Optim
	if err := model.Check(m); err != nil {
		return nil, err
	}
	n := cfg.BatchSize
	if n < 1 {
		return nil, fmt.Errorf("cross-check: batch size %d", n)
	}
	rng := rand.New(rand.NewPCG(CrossCheckSeed, 1))
	base := randomState(rng, m)
	if cfg.Precision == config.PrecisionBF16 {
		// bf16 storage holds bf16 values only: the round trip is exact
		// for a state of bf16 values.
		roundState(base)
	}
	rep := &Report{}

	// 1. Round trip.
	for _, l := range []StepLearner{ref, got} {
		if err := l.SetState(base); err != nil {
			return nil, fmt.Errorf("cross-check: SetState: %w", err)
		}
	}
	back, err := got.State()
	if err != nil {
		return nil, fmt.Errorf("cross-check: State: %w", err)
	}
	if err := back.Check(m); err != nil {
		return nil, fmt.Errorf("cross-check: State after SetState: %w", err)
	}
	compareState(rep, "state round trip", m, back, base, 0, 0)

	b, err := conditionedBatch(rng, ref, m, n)
	if err != nil {
		return nil, err
	}

	// 2. Forward.
	atoms := m.Atoms
	per := model.NumActions * atoms
	obs := append(slices.Clone(b.Obs), b.NextObs...)
	for _, f := range []struct {
		name string
		call func(StepLearner, []float32) error
	}{
		{"logits", func(l StepLearner, dst []float32) error { return l.Logits(obs, 2*n, dst) }},
		{"probabilities", func(l StepLearner, dst []float32) error { return l.Distributions(obs, 2*n, dst) }},
	} {
		rv, gv := make([]float32, 2*n*per), make([]float32, 2*n*per)
		if err := f.call(ref, rv); err != nil {
			return nil, fmt.Errorf("cross-check: reference %s: %w", f.name, err)
		}
		if err := f.call(got, gv); err != nil {
			return nil, fmt.Errorf("cross-check: %s: %w", f.name, err)
		}
		for d, nd := range market.BranchSizes {
			lo, hi := model.BranchOffset[d]*atoms, (model.BranchOffset[d]+nd)*atoms
			rb, gb := strided(rv, per, lo, hi), strided(gv, per, lo, hi)
			rep.add(f.name, fmt.Sprintf("branch %d", d), gb, rb, tol.Logits)
		}
		if f.name == "probabilities" {
			rep.addArgmax(m, gv[n*per:], rv[n*per:], n)
		}
	}

	// 3. Targets.
	rt, gt := make([]float32, n*model.NumBranches*atoms), make([]float32, n*model.NumBranches*atoms)
	if err := ref.Targets(b, rt); err != nil {
		return nil, fmt.Errorf("cross-check: reference targets: %w", err)
	}
	if err := got.Targets(b, gt); err != nil {
		return nil, fmt.Errorf("cross-check: targets: %w", err)
	}
	for d := range model.NumBranches {
		rep.add("targets", fmt.Sprintf("branch %d", d),
			strided(gt, model.NumBranches*atoms, d*atoms, (d+1)*atoms), strided(rt, model.NumBranches*atoms, d*atoms, (d+1)*atoms), tol.Targets)
	}

	// 4. Gradient.
	np := model.NumParams(m)
	rg, gg := make([]float32, np), make([]float32, np)
	rl, rps, err := ref.Gradient(b, rg)
	if err != nil {
		return nil, fmt.Errorf("cross-check: reference gradient: %w", err)
	}
	gl, gps, err := got.Gradient(b, gg)
	if err != nil {
		return nil, fmt.Errorf("cross-check: gradient: %w", err)
	}
	if len(gps) != n || len(rps) != n {
		return nil, fmt.Errorf("cross-check: gradient: %d and %d per-sample losses, want %d", len(rps), len(gps), n)
	}
	rep.addScalar("loss", gl, rl, tol.Loss)
	rep.add("per-sample loss", "", gps, rps, tol.Loss)
	bf := cfg.Precision == config.PrecisionBF16
	if bf {
		rep.addBF16("gradient", gg)
	}
	for _, blk := range model.Layout(m) {
		rep.add("gradient", blk.Name, gg[blk.Offset:blk.Offset+blk.Size()], rg[blk.Offset:blk.Offset+blk.Size()], tol.Grad)
	}

	// 5. A step that AdamW alone moves.
	calm := base.Clone()
	if o.SpectralBound > 0 {
		scaleSpectral(calm, m, func(sigma float64) float64 { return math.Min(1, o.SpectralBound/(2*sigma)) })
	}
	if cfg.Precision == config.PrecisionBF16 {
		roundState(calm)
	}
	rs, gs, err := stepBoth(ref, got, m, calm, b, rep, tol)
	if err != nil {
		return nil, err
	}
	compareMoments(rep, m, gs, rs, tol.Adam)
	compareUpdates(rep, "update (AdamW)", m, calm, gs, rs, tol.Adam, tol.Adam)
	if bf {
		rep.addBF16("online after step", gs.Online)
		rep.addBF16(model.TensorAdamM+" after step", gs.AdamM)
		rep.addBF16(model.TensorAdamV+" after step", gs.AdamV)
		for i, l := range model.Layers(m) {
			rep.addBF16(model.SpectralTensor(l)+" after step", gs.U[i])
		}
	}
	for i, l := range model.Layers(m) {
		rep.add("spectral u", l.Name, gs.U[i], rs.U[i], tol.Spectral)
	}
	rep.addScalar("adam step", float64(gs.Step), float64(rs.Step), 0)

	// 6. A step that the spectral bound scales.
	if o.SpectralBound > 0 {
		hot := base.Clone()
		scaleSpectral(hot, m, func(sigma float64) float64 { return 3 * o.SpectralBound / sigma })
		if cfg.Precision == config.PrecisionBF16 {
			roundState(hot)
		}
		rs, gs, err := stepBoth(ref, got, m, hot, b, nil, tol)
		if err != nil {
			return nil, err
		}
		compareUpdates(rep, "update (spectral)", m, hot, gs, rs, tol.Spectral, -1)
		if bf {
			rep.addBF16("online after a scaling step", gs.Online)
		}
		for i, l := range model.Layers(m) {
			rep.add("spectral u (scaled)", l.Name, gs.U[i], rs.U[i], tol.Spectral)
		}
	}

	// 7. EMA sync.
	tau := o.TargetTau
	if !(tau > 0 && tau < 1) {
		tau = 0.5
	}
	var synced [2]*model.State
	for k, l := range []StepLearner{ref, got} {
		if err := l.SetState(base); err != nil {
			return nil, fmt.Errorf("cross-check: SetState: %w", err)
		}
		if err := l.SyncTarget(tau); err != nil {
			return nil, fmt.Errorf("cross-check: SyncTarget: %w", err)
		}
		if synced[k], err = l.State(); err != nil {
			return nil, fmt.Errorf("cross-check: State: %w", err)
		}
		if err := synced[k].Check(m); err != nil {
			return nil, fmt.Errorf("cross-check: State after SyncTarget: %w", err)
		}
	}
	for _, blk := range model.Layout(m) {
		s := blk.Offset
		e := s + blk.Size()
		rep.add("sync target", blk.Name, synced[1].Target[s:e], synced[0].Target[s:e], tol.Sync)
	}
	if bf {
		rep.addBF16("target after sync", synced[1].Target)
	}
	return rep, nil
}

// addBF16 adds the quantity "bf16 values" for what (precision bf16): the
// share of got's values that are not exactly a bfloat16, which must be 0.
func (r *Report) addBF16(what string, got []float32) {
	bad := 0
	for _, v := range got {
		if bf16.Round(v) != v {
			bad++
		}
	}
	r.Comparisons = append(r.Comparisons, Comparison{Quantity: "bf16 values", Block: what,
		Err: float64(bad) / float64(max(len(got), 1)), RefNorm: float64(len(got))})
}

// stepBoth loads s into both learners, runs Step on b and returns their
// states (reference first). With rep, it adds the step's loss and
// gradient norm.
func stepBoth(ref, got StepLearner, m config.ModelConfig, s *model.State, b *model.Batch, rep *Report, tol Tolerances) (rs, gs *model.State, err error) {
	var loss, norm [2]float64
	var per [2][]float32
	var out [2]*model.State
	for k, l := range []StepLearner{ref, got} {
		if err := l.SetState(s); err != nil {
			return nil, nil, fmt.Errorf("cross-check: SetState: %w", err)
		}
		if loss[k], norm[k], per[k], err = l.Step(b); err != nil {
			return nil, nil, fmt.Errorf("cross-check: Step: %w", err)
		}
		if out[k], err = l.State(); err != nil {
			return nil, nil, fmt.Errorf("cross-check: State: %w", err)
		}
		if len(per[k]) != len(b.Return) {
			return nil, nil, fmt.Errorf("cross-check: Step returned %d per-sample losses, want %d", len(per[k]), len(b.Return))
		}
	}
	if err := out[1].Check(m); err != nil {
		return nil, nil, fmt.Errorf("cross-check: State after Step: %w", err)
	}
	if rep != nil {
		rep.addScalar("step loss", loss[1], loss[0], tol.Loss)
		rep.add("step per-sample loss", "", per[1], per[0], tol.Loss)
		rep.addScalar("step gradient norm", norm[1], norm[0], tol.Grad)
	}
	return out[0], out[1], nil
}

// compareState compares every part of two states block by block.
func compareState(rep *Report, what string, m config.ModelConfig, got, ref *model.State, tolP, tolU float64) {
	for _, blk := range model.Layout(m) {
		s, e := blk.Offset, blk.Offset+blk.Size()
		rep.add(what, model.PrefixOnline+blk.Name, got.Online[s:e], ref.Online[s:e], tolP)
		rep.add(what, model.PrefixTarget+blk.Name, got.Target[s:e], ref.Target[s:e], tolP)
	}
	rep.add(what, model.TensorAdamM, got.AdamM, ref.AdamM, tolP)
	rep.add(what, model.TensorAdamV, got.AdamV, ref.AdamV, tolP)
	rep.addNorms(what, model.TensorStep, math.Abs(float64(got.Step-ref.Step)), math.Abs(float64(ref.Step)), 0)
	for i, l := range model.Layers(m) {
		rep.add(what, model.SpectralTensor(l), got.U[i], ref.U[i], tolU)
	}
}

// compareMoments compares the AdamW moments block by block.
func compareMoments(rep *Report, m config.ModelConfig, got, ref *model.State, tol float64) {
	for _, blk := range model.Layout(m) {
		s, e := blk.Offset, blk.Offset+blk.Size()
		rep.add(model.TensorAdamM, blk.Name, got.AdamM[s:e], ref.AdamM[s:e], tol)
		rep.add(model.TensorAdamV, blk.Name, got.AdamV[s:e], ref.AdamV[s:e], tol)
	}
}

// compareUpdates compares the update p_new − p_old of every online block
// (computed exactly in float64): weight blocks against tolW, biases
// (which the spectral bound never scales) against tolB, or not at all
// when tolB < 0. The target network must not move.
func compareUpdates(rep *Report, what string, m config.ModelConfig, before, got, ref *model.State, tolW, tolB float64) {
	for _, blk := range model.Layout(m) {
		s, e := blk.Offset, blk.Offset+blk.Size()
		var d, nrm float64
		for i := s; i < e; i++ {
			old := float64(before.Online[i])
			du := (float64(got.Online[i]) - old) - (float64(ref.Online[i]) - old)
			d += du * du
			r := float64(ref.Online[i]) - old
			nrm += r * r
		}
		tol := tolW
		if blk.Bias {
			if tolB < 0 {
				continue
			}
			tol = tolB
		}
		rep.addNorms(what, blk.Name, math.Sqrt(d), math.Sqrt(nrm), tol)
	}
	rep.add(what, "target network (must not move)", got.Target, before.Target, 0)
}

// strided gathers columns [lo, hi) of each row of width w.
func strided(v []float32, w, lo, hi int) []float32 {
	out := make([]float32, 0, len(v)/w*(hi-lo))
	for r := 0; r+w <= len(v); r += w {
		out = append(out, v[r+lo:r+hi]...)
	}
	return out
}

// addArgmax reports the fraction of the n next states where got's online Q
// picks another action than ref's in some branch.
func (r *Report) addArgmax(m config.ModelConfig, got, ref []float32, n int) {
	z, _, _, _ := model.Support(m)
	differ := 0
	for i := range n {
		gq, rq := expectedQ(got, z, i), expectedQ(ref, z, i)
		for d, nd := range market.BranchSizes {
			lo := model.BranchOffset[d]
			if argmax(gq[lo:lo+nd]) != argmax(rq[lo:lo+nd]) {
				differ++
				break
			}
		}
	}
	r.Comparisons = append(r.Comparisons, Comparison{Quantity: "argmax", Block: "next states, any branch", Err: float64(differ) / float64(n), RefNorm: float64(n)})
}

// expectedQ returns Σ_j p_j·z_j of every action of row i, in float64.
func expectedQ(p []float32, z []float32, i int) []float64 {
	atoms := len(z)
	q := make([]float64, model.NumActions)
	row := p[i*model.NumActions*atoms:]
	for a := range q {
		for j, zj := range z {
			q[a] += float64(row[a*atoms+j]) * float64(zj)
		}
	}
	return q
}

func argmax(q []float64) int {
	best := 0
	for i, x := range q {
		if x > q[best] {
			best = i
		}
	}
	return best
}

// randomState draws a learner state of m: online and target parameters
// from two PyTorch-default initialisations, Adam moments of a few hundred
// steps' scale (m ~ N(0, 10⁻³), v = m² + 10⁻⁸·U(0, 1)), step 10, u from
// InitSpectral.
func randomState(rng *rand.Rand, m config.ModelConfig) *model.State {
	np := model.NumParams(m)
	s := &model.State{
		Online: make([]float32, np), Target: make([]float32, np),
		AdamM: make([]float32, np), AdamV: make([]float32, np), Step: 10,
	}
	model.InitParams(s.Online, m, rng.Uint64())
	model.InitParams(s.Target, m, rng.Uint64())
	for i := range s.AdamM {
		mi := 1e-3 * rng.NormFloat64()
		s.AdamM[i] = float32(mi)
		s.AdamV[i] = float32(mi*mi + 1e-8*rng.Float64())
	}
	s.U = model.InitSpectral(m, rng.Uint64())
	return s
}

// roundState rounds every value of s to the nearest bfloat16.
func roundState(s *model.State) {
	for _, x := range [][]float32{s.Online, s.Target, s.AdamM, s.AdamV} {
		bf16.RoundSlice(x)
	}
	for _, u := range s.U {
		bf16.RoundSlice(u)
	}
}

// scaleSpectral multiplies each weight matrix of s.Online by
// factor(σ), σ its largest singular value (float64 power iteration).
func scaleSpectral(s *model.State, m config.ModelConfig, factor func(sigma float64) float64) {
	for _, l := range model.Layers(m) {
		w := s.Online[l.W:l.B]
		sigma := largestSingularValue(w, l.Out, l.In)
		if sigma == 0 {
			continue
		}
		c := factor(sigma)
		for i := range w {
			w[i] = float32(float64(w[i]) * c)
		}
	}
}

// largestSingularValue estimates σ₁ of the rows×cols matrix w by 100
// power iterations on WᵀW in float64, from the all-ones vector.
func largestSingularValue(w []float32, rows, cols int) float64 {
	v := make([]float64, cols)
	for i := range v {
		v[i] = 1
	}
	u := make([]float64, rows)
	sigma := 0.0
	for range 100 {
		for r := range rows {
			var s float64
			for c, x := range w[r*cols : (r+1)*cols] {
				s += float64(x) * v[c]
			}
			u[r] = s
		}
		sigma = norm64(u)
		if sigma == 0 {
			return 0
		}
		clear(v)
		for r := range rows {
			for c, x := range w[r*cols : (r+1)*cols] {
				v[c] += float64(x) * u[r]
			}
		}
		nv := norm64(v)
		if nv == 0 {
			return 0
		}
		for c := range v {
			v[c] /= nv
		}
	}
	return sigma
}

func norm64(x []float64) float64 {
	var s float64
	for _, e := range x {
		s += e * e
	}
	return math.Sqrt(s)
}

// conditionedBatch draws a batch of n samples whose next states have no
// near-tie in the reference's online Q (see Compare): observations
// N(0, 1), uniform actions, returns N(0, ((v_max − v_min)/8)²) clipped to
// the support, discounts 0 for one sample in eight and U(0.9, 1) else,
// weights U(0.2, 1).
func conditionedBatch(rng *rand.Rand, ref StepLearner, m config.ModelConfig, n int) (*model.Batch, error) {
	const od = market.ObsDim
	z, _, _, _ := model.Support(m)
	width := m.VMax - m.VMin
	next := make([]float32, 0, n*od)
	margin := 0.01 * width
	const pool = 256
	cand := make([]float32, pool*od)
	p := make([]float32, pool*model.NumActions*m.Atoms)
	for tries := 0; len(next) < n*od; tries++ {
		if tries > 0 && tries%20 == 0 {
			margin /= 1.5
		}
		if tries == 200 {
			return nil, errors.New("cross-check: found no next states without near-ties in Q; the reference's Q values are all nearly equal")
		}
		for i := range cand {
			cand[i] = float32(rng.NormFloat64())
		}
		if err := ref.Distributions(cand, pool, p); err != nil {
			return nil, fmt.Errorf("cross-check: reference distributions: %w", err)
		}
		for i := 0; i < pool && len(next) < n*od; i++ {
			q := expectedQ(p, z, i)
			if minGap(q) >= margin {
				next = append(next, cand[i*od:(i+1)*od]...)
			}
		}
	}
	b := &model.Batch{
		Obs: make([]float32, n*od), NextObs: next, Actions: make([]int32, n*model.NumBranches),
		Return: make([]float32, n), Discount: make([]float32, n), Weight: make([]float32, n),
	}
	for i := range b.Obs {
		b.Obs[i] = float32(rng.NormFloat64())
	}
	for i := range n {
		for d, nd := range market.BranchSizes {
			b.Actions[i*model.NumBranches+d] = int32(rng.IntN(nd))
		}
		b.Return[i] = float32(math.Max(m.VMin, math.Min(m.VMax, rng.NormFloat64()*width/8)))
		if rng.IntN(8) == 0 {
			b.Discount[i] = 0
		} else {
			b.Discount[i] = float32(0.9 + 0.1*rng.Float64())
		}
		b.Weight[i] = float32(0.2 + 0.8*rng.Float64())
	}
	return b, nil
}

// minGap is the smallest gap between the best and second-best Q over the
// branches.
func minGap(q []float64) float64 {
	g := math.Inf(1)
	for d, nd := range market.BranchSizes {
		lo := model.BranchOffset[d]
		best, second := math.Inf(-1), math.Inf(-1)
		for _, x := range q[lo : lo+nd] {
			if x > best {
				best, second = x, best
			} else if x > second {
				second = x
			}
		}
		g = math.Min(g, best-second)
	}
	return g
}
