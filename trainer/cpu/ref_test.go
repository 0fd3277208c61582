package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// This file is an independent float64 reference of the network, the C51
// target and the loss, written with plain loops from DESIGN.md §3 and the
// Layout contract only. Tests compare the float32 implementation with it.

// refModel is the small model of the reference tests.
var refModel = config.ModelConfig{Trunk1: 16, Trunk2: 16, Head: 8, Atoms: 11, VMin: -5, VMax: 5}

// refOptim is an optimiser config for tests.
var refOptim = config.OptimConfig{
	LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2,
	ClipNorm: 10, SpectralBound: 4, Gamma: 0.99, NStep: 3, TargetTau: 0.5,
}

// ref is a float64 network. With mixed set it rounds exactly the operands
// that the package documentation says bf16-mixed rounds: the observation,
// the weights and the ReLU outputs that feed a GEMM.
type ref struct {
	m      config.ModelConfig
	p      []float64
	blocks map[string]model.Block
	mixed  bool
}

func newRef(m config.ModelConfig, p []float32, mixed bool) *ref {
	r := &ref{m: m, p: make([]float64, len(p)), blocks: map[string]model.Block{}, mixed: mixed}
	for i, x := range p {
		r.p[i] = float64(x)
	}
	for _, b := range model.Layout(m) {
		r.blocks[b.Name] = b
	}
	return r
}

// rnd rounds x to bf16 in mixed mode.
func (r *ref) rnd(x float64) float64 {
	if !r.mixed {
		return x
	}
	return float64(bf16.Round(float32(x)))
}

// dense computes W·x + b for layer name, with ReLU when relu is set.
func (r *ref) dense(name string, x []float64, relu bool) []float64 {
	w, b := r.blocks[name+".weight"], r.blocks[name+".bias"]
	y := make([]float64, w.Rows)
	for o := range y {
		s := 0.0
		for i := 0; i < w.Cols; i++ {
			s += r.rnd(r.p[w.Offset+o*w.Cols+i]) * x[i]
		}
		y[o] = s + r.p[b.Offset+o]
		if relu {
			y[o] = r.rnd(math.Max(y[o], 0))
		}
	}
	return y
}

// forward returns the log-probabilities and probabilities of every branch
// action of one observation, [model.NumActions][Atoms].
func (r *ref) forward(obs []float32) (logp, prob [][]float64) {
	x := make([]float64, len(obs))
	for i, v := range obs {
		x[i] = r.rnd(float64(v))
	}
	h2 := r.dense("s2", r.dense("s1", x, true), true)
	v := r.dense("v2", r.dense("v1", h2, true), false)
	atoms := r.m.Atoms
	for d, nd := range market.BranchSizes {
		a := r.dense(layerName("a2", d), r.dense(layerName("a1", d), h2, true), false)
		for k := 0; k < nd; k++ {
			l := make([]float64, atoms)
			for j := range l {
				mean := 0.0
				for k2 := 0; k2 < nd; k2++ {
					mean += a[k2*atoms+j]
				}
				l[j] = v[j] + a[k*atoms+j] - mean/float64(nd)
			}
			mx := math.Inf(-1)
			for _, e := range l {
				mx = math.Max(mx, e)
			}
			s := 0.0
			for _, e := range l {
				s += math.Exp(e - mx)
			}
			lp, p := make([]float64, atoms), make([]float64, atoms)
			for j, e := range l {
				lp[j] = e - mx - math.Log(s)
				p[j] = math.Exp(lp[j])
			}
			logp, prob = append(logp, lp), append(prob, p)
		}
	}
	return logp, prob
}

func layerName(kind string, d int) string { return kind + "_" + string(rune('0'+d)) }

// support returns z_j = v_min + j·Δz.
func refSupport(m config.ModelConfig) []float64 {
	z := make([]float64, m.Atoms)
	for j := range z {
		z[j] = m.VMin + float64(j)*(m.VMax-m.VMin)/float64(m.Atoms-1)
	}
	return z
}

// refProject is the C51 projection of p shifted to R + discount·z.
func refProject(p, z []float64, R, discount float64) []float64 {
	n := len(z)
	vmin, vmax, dz := z[0], z[n-1], z[1]-z[0]
	m := make([]float64, n)
	for j := range p {
		tz := math.Min(math.Max(R+discount*z[j], vmin), vmax)
		b := math.Min(math.Max((tz-vmin)/dz, 0), float64(n-1))
		l, u := math.Floor(b), math.Ceil(b)
		if l == u {
			m[int(l)] += p[j]
		} else {
			m[int(l)] += p[j] * (u - b)
			m[int(u)] += p[j] * (b - l)
		}
	}
	return m
}

// refTargets computes the double-DQN C51 targets [n][model.NumBranches][Atoms]:
// online argmax of expected value at s′ per branch, target distribution.
func refTargets(online, target *ref, b *model.Batch) [][][]float64 {
	z := refSupport(online.m)
	n := len(b.Return)
	out := make([][][]float64, n)
	for i := 0; i < n; i++ {
		next := b.NextObs[i*market.ObsDim : (i+1)*market.ObsDim]
		_, pOn := online.forward(next)
		_, pTg := target.forward(next)
		for d, nd := range market.BranchSizes {
			best, bestQ := 0, math.Inf(-1)
			for a := 0; a < nd; a++ {
				q := 0.0
				for j, p := range pOn[model.BranchOffset[d]+a] {
					q += p * z[j]
				}
				if q > bestQ {
					best, bestQ = a, q
				}
			}
			out[i] = append(out[i], refProject(pTg[model.BranchOffset[d]+best], z, float64(b.Return[i]), float64(b.Discount[i])))
		}
	}
	return out
}

// refLoss returns the batch loss (1/n)·Σ w_i·(1/3)·Σ_d CE and the
// per-sample losses for fixed targets.
func refLoss(online *ref, b *model.Batch, targets [][][]float64) (float64, []float64) {
	n := len(b.Return)
	per := make([]float64, n)
	loss := 0.0
	for i := 0; i < n; i++ {
		logp, _ := online.forward(b.Obs[i*market.ObsDim : (i+1)*market.ObsDim])
		for d := range market.BranchSizes {
			a := int(b.Actions[i*model.NumBranches+d])
			for j, m := range targets[i][d] {
				per[i] -= m * logp[model.BranchOffset[d]+a][j]
			}
		}
		per[i] /= model.NumBranches
		loss += float64(b.Weight[i]) * per[i]
	}
	return loss / float64(n), per
}

// randomBatch draws a batch of n transitions: N(0,1) observations, random
// actions, returns in [−6, 6] (past the support of refModel), some done
// transitions and importance weights in [0.2, 1.2].
func randomBatch(r *rand.Rand, n int) *model.Batch {
	b := &model.Batch{
		Obs: make([]float32, n*market.ObsDim), NextObs: make([]float32, n*market.ObsDim),
		Actions: make([]int32, n*model.NumBranches), Return: make([]float32, n),
		Discount: make([]float32, n), Weight: make([]float32, n),
	}
	for i := range b.Obs {
		b.Obs[i] = float32(r.NormFloat64())
		b.NextObs[i] = float32(r.NormFloat64())
	}
	for i := 0; i < n; i++ {
		for d, nd := range market.BranchSizes {
			b.Actions[i*model.NumBranches+d] = int32(r.IntN(nd))
		}
		b.Return[i] = float32(12*r.Float64() - 6)
		b.Discount[i] = float32(math.Pow(0.99, 3))
		if i%3 == 2 {
			b.Discount[i] = 0
		}
		b.Weight[i] = float32(0.2 + r.Float64())
	}
	return b
}

// testLearner builds a learner whose target network differs from its
// online network, so that tests see which network supplies what.
func testLearner(t testing.TB, m config.ModelConfig, o config.OptimConfig, precision string, seed uint64) *Learner {
	t.Helper()
	l, err := NewLearner(m, o, precision, seed)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewNet(m, precision, seed+1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Target().SetParams(other.Params()); err != nil {
		t.Fatal(err)
	}
	return l
}

// refGradients is a float64 reference backward pass by plain loops for
// fixed targets, with the bf16-mixed roundings of the package doc when
// r.mixed is set: the upstream gradient G of each layer is rounded after
// its bias gradient and before it meets W (rounded) or x (the stored,
// rounded activation).
func refGradients(r *ref, b *model.Batch, targets [][][]float64) []float64 {
	type lay struct {
		name, src string
		relu      bool
	}
	net := []lay{{"s1", "", true}, {"s2", "s1", true}, {"v1", "s2", true}, {"v2", "v1", false}}
	for d := range market.BranchSizes {
		net = append(net, lay{layerName("a1", d), "s2", true}, lay{layerName("a2", d), layerName("a1", d), false})
	}
	n, atoms := len(b.Return), r.m.Atoms
	grad := make([]float64, len(r.p))
	for i := 0; i < n; i++ {
		// Forward, keeping every layer's input and output.
		out := map[string][]float64{}
		obs := make([]float64, market.ObsDim)
		for k, v := range b.Obs[i*market.ObsDim : (i+1)*market.ObsDim] {
			obs[k] = r.rnd(float64(v))
		}
		input := func(l lay) []float64 {
			if l.src == "" {
				return obs
			}
			return out[l.src]
		}
		for _, l := range net {
			out[l.name] = r.dense(l.name, input(l), l.relu)
		}
		_, prob := r.forward(b.Obs[i*market.ObsDim : (i+1)*market.ObsDim])

		// Loss gradient through the softmax and the dueling aggregation.
		up := map[string][]float64{"v2": make([]float64, atoms)}
		k := float64(b.Weight[i]) / float64(model.NumBranches*n)
		for d, nd := range market.BranchSizes {
			a := int(b.Actions[i*model.NumBranches+d])
			m := targets[i][d]
			s := 0.0
			for _, x := range m {
				s += x
			}
			ga := make([]float64, nd*atoms)
			for j := 0; j < atoms; j++ {
				g := k * (prob[model.BranchOffset[d]+a][j]*s - m[j])
				up["v2"][j] += g
				for a2 := 0; a2 < nd; a2++ {
					ga[a2*atoms+j] -= g / float64(nd)
				}
				ga[a*atoms+j] += g
			}
			up[layerName("a2", d)] = ga
		}

		// Linear layers, last first.
		for li := len(net) - 1; li >= 0; li-- {
			l := net[[]int{3, 5, 7, 9, 2, 4, 6, 8, 1, 0}[len(net)-1-li]]
			w, bias := r.blocks[l.name+".weight"], r.blocks[l.name+".bias"]
			g := up[l.name]
			for o := range g {
				if l.relu && !(out[l.name][o] > 0) {
					g[o] = 0
				}
				grad[bias.Offset+o] += g[o]
				g[o] = r.rnd(g[o])
			}
			x := input(l)
			if l.src != "" && up[l.src] == nil {
				up[l.src] = make([]float64, len(x))
			}
			for o := range g {
				for c := 0; c < w.Cols; c++ {
					grad[w.Offset+o*w.Cols+c] += g[o] * x[c]
					if l.src != "" {
						up[l.src][c] += g[o] * r.rnd(r.p[w.Offset+o*w.Cols+c])
					}
				}
			}
		}
	}
	return grad
}
