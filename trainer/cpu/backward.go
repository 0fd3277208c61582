package cpu

import (
	"math"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// backward computes the per-sample losses into l.sample, the batch loss,
// and the gradient of the batch loss with respect to every parameter into
// l.grad, from the forward pass and the projected targets of gradients.
//
// Loss (float32, sums in index order): for sample i with weight w_i and
// taken actions a_id, and c_id = −Σ_j m_idj·logp_j(s_i, a_id),
//
//	ℓ_i  = (c_i0 + c_i1 + c_i2) / 3
//	loss = (Σ_i w_i·ℓ_i) / n
//
// Gradient with respect to the logits L of the taken action of branch d
// (m is a constant target; S = Σ_j m_j, which is 1 up to rounding):
//
//	∂loss/∂L_j = k_i·(p_j·S − m_j),   k_i = w_i / float32(3n)
//
// and zero for the other actions. Through the dueling aggregation
// L[a,j] = V[j] + A_d[a,j] − mean_a' A_d[a',j]:
//
//	∂loss/∂V[j]      = Σ_d ∂loss/∂L_d[a_id, j]                 (d in order)
//	∂loss/∂A_d[a, j] = [a = a_id]·∂loss/∂L_d[a_id,j] − ∂loss/∂L_d[a_id,j]/n_d
//
// Then, for each linear layer y = x·Wᵀ + b with upstream gradient G = ∂loss/∂y
// (n×out; masked by [h > 0] for a ReLU layer, h its stored output):
//
//	∂loss/∂b = Σ_rows G          (float32, row order, from the unrounded G)
//	∂loss/∂W = Gᵀ·x              (GEMM)
//	∂loss/∂x = G·W               (GEMM; summed over the layers reading x)
//
// In bf16-mixed mode G is rounded to bf16 after ∂loss/∂b and before both
// GEMMs, W is the bf16 copy and x the stored bf16 activation, so that every
// GEMM operand is bf16 and the accumulation float32.
func (l *Learner) backward(b *model.Batch, n int) float32 {
	on := l.online
	l.batch, l.n = b, n
	parallel(l.workers(), n, l.headFn)
	l.batch = nil // the caller's batch is not kept
	var loss float32
	for i := 0; i < n; i++ {
		loss += float32(b.Weight[i] * l.sample[i])
	}
	loss /= float32(n)

	for gi := len(on.groups) - 1; gi >= 0; gi-- {
		l.groupBackward(&on.groups[gi], n)
	}
	return loss
}

// positive returns all ones when h > 0 and zero otherwise (h = +0 or NaN:
// a stored ReLU output is never negative), without a branch: the bits
// minus one of a positive float32 are below those of +Inf, those of +0
// wrap around and those of a NaN are above. A data-dependent branch here
// mispredicts on half the activations.
func positive(h float32) uint32 {
	t := int64(math.Float32bits(h) - 1) // +0 wraps to 2³²−1
	return uint32((t - 0x7f800000) >> 63)
}

// headRows computes, for samples lo…hi−1 with worker w's scratch, the
// per-sample losses ℓ_i and the gradient of the loss with respect to the
// outputs of v2 and a2_d (formulas at backward).
func (l *Learner) headRows(lo, hi, w int) {
	on, b, n, s := l.online, l.batch, l.n, &l.scr[w]
	atoms := on.model.Atoms
	gOut, wOut := l.g[lvOut], on.width[lvOut]
	for i := lo; i < hi; i++ {
		ki := b.Weight[i] / float32(model.NumBranches*n)
		gv := gOut[i*wOut+on.place[model.LayerV2] : i*wOut+on.place[model.LayerV2]+atoms]
		clear(gv)
		var ce [model.NumBranches]float32
		for d, nd := range market.BranchSizes {
			a := int(b.Actions[i*model.NumBranches+d])
			on.actionDist(i, d, a, s)
			m := l.tgt[(i*model.NumBranches+d)*atoms : (i*model.NumBranches+d+1)*atoms]
			ce[d] = crossEntropy(m, s.logp)
			var sum float32
			for _, x := range m {
				sum += x
			}
			for j, pj := range s.prob {
				s.glogit[j] = float32(ki * (float32(pj*sum) - m[j]))
			}
			count := float32(nd)
			o := i*wOut + on.place[model.LayerA2(d)]
			ga := gOut[o : o+nd*atoms]
			for a2 := 0; a2 < nd; a2++ {
				dst := ga[a2*atoms : (a2+1)*atoms]
				for j, g := range s.glogit {
					dst[j] = -(g / count)
					if a2 == a {
						dst[j] += g
					}
				}
			}
			for j, g := range s.glogit {
				gv[j] += g
			}
		}
		l.sample[i] = (ce[0] + ce[1] + ce[2]) / model.NumBranches
	}
}

// gradCols applies, for columns lo…hi−1 of the group l.bg (relative to its
// first column) and all l.n rows, the ReLU mask (hidden layers), sums the
// bias gradient in row order into l.gb, and (mixed) rounds the gradient to
// bf16. Columns are independent, so the split does not change a bit.
func (l *Learner) gradCols(lo, hi, _ int) {
	on, g, n := l.online, l.bg, l.n
	ld := on.width[g.level]
	gy := l.g[g.level]
	c0, c1 := g.col+lo, g.col+hi
	if g.level != lvOut {
		h := on.act.lv[g.level]
		for r := 0; r < n; r++ {
			hr, gr := h[r*ld+c0:r*ld+c1], gy[r*ld+c0:r*ld+c1]
			for k, x := range hr {
				gr[k] = math.Float32frombits(math.Float32bits(gr[k]) & positive(x))
			}
		}
	}
	db := l.gb[lo:hi]
	copy(db, gy[c0:c1])
	for r := 1; r < n; r++ {
		for j, x := range gy[r*ld+c0 : r*ld+c1] {
			db[j] += x
		}
	}
	if on.mixed {
		for r := 0; r < n; r++ {
			bf16.RoundSlice(gy[r*ld+c0 : r*ld+c1])
		}
	}
}

// groupBackward back-propagates through the layers of GEMM group g for n
// rows: it applies the ReLU mask to their columns of the level's gradient
// for hidden layers, writes ∂loss/∂b and ∂loss/∂W of each layer into
// l.grad and, unless the group reads the observation, writes ∂loss/∂x into
// the columns of the level it reads (formulas at backward). With the four
// heads' hidden layers stacked in one group, ∂loss/∂x = G·W is one GEMM
// whose inner sum runs over v1, a1_0, a1_1, a1_2 in that order.
func (l *Learner) groupBackward(g *gemmGroup, n int) {
	on := l.online
	ld := on.width[g.level]
	gy := l.g[g.level]
	l.bg, l.n = g, n
	parallel(l.workers(), g.out, l.gradColsFn)
	for _, i := range g.layers {
		ly := &on.lay[i]
		c := on.place[i] - g.col
		copy(l.grad[ly.B:ly.B+ly.Out], l.gb[c:c+ly.Out])
	}
	x, ldx := on.act.lv[g.srcLvl][g.srcCol:], on.width[g.srcLvl]
	for _, i := range g.layers {
		ly := &on.lay[i]
		on.lib.Sgemm(true, false, ly.Out, ly.In, n, gy[on.place[i]:], ld, x, ldx, 0, l.grad[ly.W:ly.B], ly.In)
	}
	if g.srcLvl == lvObs {
		return
	}
	on.lib.Sgemm(false, false, n, g.in, g.out, gy[g.col:], ld, on.gw[g.w:], g.in, 0, l.g[g.srcLvl][g.srcCol:], ldx)
}
