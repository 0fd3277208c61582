package cpu

import (
	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// backwardOrder lists the layers so that every layer comes after all the
// layers that read its output: the four heads' outputs, their hidden
// layers, then the trunk. Gradients flowing into s2's output are summed in
// the order v1, a1_0, a1_1, a1_2.
var backwardOrder = [model.NumLayers]int{
	model.LayerV2, model.LayerA2(0), model.LayerA2(1), model.LayerA2(2),
	model.LayerV1, model.LayerA1(0), model.LayerA1(1), model.LayerA1(2),
	model.LayerS2, model.LayerS1,
}

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
	atoms := on.model.Atoms
	row := model.NumActions * atoms
	var loss float32
	for i := 0; i < n; i++ {
		ki := b.Weight[i] / float32(model.NumBranches*n)
		gv := l.g[model.LayerV2][i*atoms : (i+1)*atoms]
		clear(gv)
		var ce [model.NumBranches]float32
		for d, nd := range market.BranchSizes {
			a := int(b.Actions[i*model.NumBranches+d])
			o := i*row + (model.BranchOffset[d]+a)*atoms
			logp, p := on.act.logp[o:o+atoms], on.act.p[o:o+atoms]
			m := l.tgt[(i*model.NumBranches+d)*atoms : (i*model.NumBranches+d+1)*atoms]
			ce[d] = crossEntropy(m, logp)
			var s float32
			for _, x := range m {
				s += x
			}
			for j, pj := range p {
				l.glogit[j] = float32(ki * (float32(pj*s) - m[j]))
			}
			count := float32(nd)
			ga := l.g[model.LayerA2(d)][i*nd*atoms : (i+1)*nd*atoms]
			for a2 := 0; a2 < nd; a2++ {
				dst := ga[a2*atoms : (a2+1)*atoms]
				for j, g := range l.glogit {
					dst[j] = -(g / count)
					if a2 == a {
						dst[j] += g
					}
				}
			}
			for j, g := range l.glogit {
				gv[j] += g
			}
		}
		l.sample[i] = (ce[0] + ce[1] + ce[2]) / model.NumBranches
		loss += float32(b.Weight[i] * l.sample[i])
	}
	loss /= float32(n)

	l.written = [model.NumLayers]bool{}
	for _, i := range backwardOrder {
		l.linearBackward(i, n)
	}
	return loss
}

// linearBackward back-propagates through layer i for n rows: it applies
// the ReLU mask to l.g[i] for a hidden layer, writes ∂loss/∂b and ∂loss/∂W
// into l.grad and, unless layer i reads the observation, writes or adds
// ∂loss/∂x into the gradient of the layer it reads (formulas at backward).
func (l *Learner) linearBackward(i, n int) {
	on := l.online
	ly := &on.lay[i]
	gy := l.g[i][:n*ly.Out]
	if ly.ReLU {
		h := on.act.h[i][:n*ly.Out]
		for k, x := range h {
			if !(x > 0) {
				gy[k] = 0
			}
		}
	}
	db := l.grad[ly.B : ly.B+ly.Out]
	copy(db, gy[:ly.Out])
	for r := 1; r < n; r++ {
		for j, x := range gy[r*ly.Out : (r+1)*ly.Out] {
			db[j] += x
		}
	}
	if on.mixed {
		bf16.RoundSlice(gy)
	}
	x := on.input(i)
	gemm(on.workers, true, ly.Out, ly.In, n, gy, ly.Out, x, ly.In, 0, l.grad[ly.W:ly.B], ly.In)
	if ly.Src < 0 {
		return
	}
	var beta float32
	if l.written[ly.Src] {
		beta = 1
	}
	gemm(on.workers, false, n, ly.In, ly.Out, gy, ly.Out, on.gemmW[ly.W:ly.B], ly.In, beta, l.g[ly.Src], ly.In)
	l.written[ly.Src] = true
}
