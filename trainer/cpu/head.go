package cpu

import (
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// head turns the value and advantage outputs into per-action distributions
// (Wang et al. 2016 dueling, per atom). For each observation, branch d with
// n_d actions, action a and atom j, in float32:
//
//	mean_j  = (Σ_a' A_d[a',j]) / n_d                 (sum in action order)
//	L[a,j]  = (V[j] + A_d[a,j]) − mean_j
//	logp_j  = (L_j − max_k L_k) − log Σ_k exp(L_k − max_k L_k)
//	p_j     = exp(L_j − max_k L_k) / Σ_k exp(L_k − max_k L_k)
//
// exp is exp32 (float32 arithmetic, within 1 ulp of e^x) and log is
// math.Log of the float32 argument, rounded to float32.
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
	for r := 0; r < rows; r++ {
		v := n.outV(r)
		for d, nd := range market.BranchSizes {
			base := (r*model.NumActions + model.BranchOffset[d]) * atoms
			dueling(v, n.outA(r, d), nd, n.mean, dst[base:base+nd*atoms])
		}
	}
}

// outV returns the value head's output V (Atoms) of row r.
func (n *Net) outV(r int) []float32 {
	o := r*n.width[lvOut] + n.place[model.LayerV2]
	return n.act.lv[lvOut][o : o+n.model.Atoms]
}

// outA returns branch d's advantage output A_d (n_d×Atoms, action-major)
// of row r.
func (n *Net) outA(r, d int) []float32 {
	o := r*n.width[lvOut] + n.place[model.LayerA2(d)]
	return n.act.lv[lvOut][o : o+market.BranchSizes[d]*n.model.Atoms]
}

// dueling writes the logits L[a,j] = (V[j] + A[a,j]) − mean_a' A[a',j] of
// one branch with nd actions into dst (nd×atoms). mean is atoms scratch.
func dueling(v, adv []float32, nd int, mean, dst []float32) {
	branchMean(adv, nd, mean)
	atoms := len(v)
	for a := 0; a < nd; a++ {
		duelingAction(v, adv[a*atoms:(a+1)*atoms], mean, dst[a*atoms:(a+1)*atoms])
	}
}

// branchMean writes mean_j = (Σ_a A[a,j]) / nd, summed in action order, of
// one branch's advantages adv (nd×atoms) to mean (atoms).
func branchMean(adv []float32, nd int, mean []float32) {
	atoms := len(mean)
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
}

// duelingAction writes the logits (V[j] + A[j]) − mean_j of one action with
// advantages a to dst.
func duelingAction(v, a, mean, dst []float32) {
	for j := range dst {
		dst[j] = (v[j] + a[j]) - mean[j]
	}
}

// rowQ writes the expected values Q of all NumActions branch actions of
// row r of the forward scratch (see head and expected) to q, with the
// worker scratch s; it does not touch act.logp and act.p.
func (n *Net) rowQ(r int, q []float32, s *scratch) {
	atoms := n.model.Atoms
	v := n.outV(r)
	for d, nd := range market.BranchSizes {
		l, p := s.l[:nd*atoms], s.p[:nd*atoms]
		dueling(v, n.outA(r, d), nd, s.mean, l)
		for a := 0; a < nd; a++ {
			softmax(l[a*atoms:(a+1)*atoms], p[a*atoms:(a+1)*atoms])
		}
		expected(p, n.support, q[model.BranchOffset[d]:model.BranchOffset[d]+nd])
	}
}

// actionDist writes the log-softmax s.logp and the softmax s.prob of
// action a of branch d at row r of the forward scratch: the values head
// computes for it, without the other actions' softmax.
func (n *Net) actionDist(r, d, a int, s *scratch) {
	atoms := n.model.Atoms
	adv := n.outA(r, d)
	branchMean(adv, market.BranchSizes[d], s.mean)
	duelingAction(n.outV(r), adv[a*atoms:(a+1)*atoms], s.mean, s.logp)
	logSoftmax(s.logp, s.prob)
}

// logSoftmax replaces the logits in l by their log-softmax and writes the
// softmax to p, subtracting the maximum first (formulas at head).
func logSoftmax(l, p []float32) {
	mx, s := softmaxTerms(l, p)
	ls := log32(s)
	for j, x := range l {
		l[j] = (x - mx) - ls
		p[j] /= s
	}
}

// softmax writes the softmax of the logits l to p, the same values as
// logSoftmax's p, without the log-probabilities.
func softmax(l, p []float32) {
	_, s := softmaxTerms(l, p)
	for j := range p {
		p[j] /= s
	}
}

// softmaxTerms writes p_j = exp(l_j − m), m = max_j l_j, and returns m and
// Σ_j p_j, summed in atom order: the terms both softmaxes divide by the sum.
func softmaxTerms(l, p []float32) (mx, s float32) {
	mx = l[0]
	for _, x := range l[1:] {
		if x > mx {
			mx = x
		}
	}
	for j, x := range l {
		e := exp32(x - mx)
		p[j] = e
		s += e
	}
	return mx, s
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
