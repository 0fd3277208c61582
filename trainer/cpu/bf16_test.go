package cpu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/config"
)

// isBF16 reports the first value of x that is not exactly a bfloat16.
func isBF16(x []float32) (int, bool) {
	for i, v := range x {
		if bf16.Round(v) != v {
			return i, false
		}
	}
	return 0, true
}

// smallLROptim moves weights by less than half a bf16 ulp on most steps:
// lr 1e-4 against weights of about 0.1 (ulp 2⁻¹¹ ≈ 5e-4), the regime
// where bf16 storage stagnates.
var smallLROptim = func() config.OptimConfig {
	o := refOptim
	o.LR = 1e-4
	return o
}()

// TestBF16ModeStoresTheStateAsBF16: after steps and a target sync every
// stored value of precision bf16 (parameters of both networks, moments,
// spectral vectors) is exactly a bfloat16, and the gradient of a step is
// too; bf16-mixed after the same steps keeps float32 masters and moments
// that are not.
func TestBF16ModeStoresTheStateAsBF16(t *testing.T) {
	for _, sr := range []bool{false, true} {
		o := refOptim
		o.StochasticRounding = sr
		l := testLearner(t, mediumModel, o, config.PrecisionBF16, 5)
		mixed := testLearner(t, mediumModel, refOptim, config.PrecisionBF16Mixed, 5)
		rng := rand.New(rand.NewPCG(3, 4))
		for range 3 {
			b := randomBatch(rng, 40)
			if _, err := l.Step(b); err != nil {
				t.Fatal(err)
			}
			if _, err := mixed.Step(b); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range []*Learner{l, mixed} {
			if err := x.SyncTarget(0.3); err != nil {
				t.Fatal(err)
			}
		}
		names := []string{"online", "target", "adam.m", "adam.v"}
		for k, x := range [][]float32{l.online.params, l.target.params, l.m, l.v} {
			if i, ok := isBF16(x); !ok {
				t.Errorf("sr=%v: %s[%d] = %g is not a bf16 value", sr, names[k], i, x[i])
			}
		}
		for i, u := range l.u {
			if j, ok := isBF16(u); !ok {
				t.Errorf("sr=%v: spectral u of layer %d [%d] = %g is not a bf16 value", sr, i, j, u[j])
			}
		}
		g := make([]float32, l.NumParams())
		if _, err := l.Gradient(randomBatch(rng, 40), g); err != nil {
			t.Fatal(err)
		}
		if i, ok := isBF16(g); !ok {
			t.Errorf("sr=%v: gradient[%d] = %g is not a bf16 value", sr, i, g[i])
		}
		for k, x := range [][]float32{mixed.online.params, mixed.m, mixed.v} {
			if _, ok := isBF16(x); ok {
				t.Errorf("bf16-mixed %s is all bf16 values after 3 steps: are the masters float32?", names[[]int{0, 2, 3}[k]])
			}
		}
	}
}

// TestStochasticRoundingIsReproducible: two bf16 learners with stochastic
// rounding and the same seed, fed the same batches, hold bit-identical
// state; the same state and batches under another seed give other
// weights (the rounding bits come from the seed), and without stochastic
// rounding others again.
func TestStochasticRoundingIsReproducible(t *testing.T) {
	o := smallLROptim
	o.StochasticRounding = true
	run := func(o config.OptimConfig, seed uint64) *Learner {
		l := testLearner(t, mediumModel, o, config.PrecisionBF16, seed)
		base := testLearner(t, mediumModel, o, config.PrecisionBF16, 42)
		if err := l.SetState(base.State()); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(9, 9))
		for range 4 {
			if _, err := l.Step(randomBatch(rng, 40)); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	a, b := run(o, 42), run(o, 42)
	sa, sb := state(a), state(b)
	for k := range sa {
		if i, ok := sameBits(sa[k], sb[k]); !ok {
			t.Fatalf("state %d differs at %d: %g vs %g", k, i, sa[k][i], sb[k][i])
		}
	}
	if _, ok := sameBits(run(o, 43).online.params, a.online.params); ok {
		t.Errorf("stochastic rounding with seeds 42 and 43 gives the same weights from the same state")
	}
	if _, ok := sameBits(run(smallLROptim, 42).online.params, a.online.params); ok {
		t.Errorf("stochastic rounding and rounding to nearest give the same weights")
	}
}

// TestStagnationIsMeasured: with a learning rate whose updates are mostly
// below half a bf16 ulp of the weights, bf16 rounding to nearest leaves
// most weights unchanged (stagnation above one half); stochastic rounding
// moves a weight with probability |update|/ulp, so fewer stay unchanged
// (measured 0.64 against 0.77 here); fp32 and bf16-mixed, whose masters
// are float32, almost never stagnate (below 1 %). Every count is of
// updates whose Adam term is not zero: all parameters but those whose
// gradient is zero (dead ReLU units).
func TestStagnationIsMeasured(t *testing.T) {
	share := func(precision string, sr bool) float64 {
		o := smallLROptim
		o.StochasticRounding = sr
		l := testLearner(t, mediumModel, o, precision, 7)
		rng := rand.New(rand.NewPCG(2, 2))
		for range 3 {
			if _, err := l.Step(randomBatch(rng, 40)); err != nil {
				t.Fatal(err)
			}
		}
		s, n := l.Stagnation()
		if all := 3 * int64(l.NumParams()); n > all || n < all*9/10 {
			t.Errorf("%s sr=%v: %d updates counted, want nearly 3 steps × %d parameters", precision, sr, n, l.NumParams())
		}
		l.ResetStagnation()
		if s2, n2 := l.Stagnation(); s2 != 0 || n2 != 0 {
			t.Errorf("after ResetStagnation: %g of %d", s2, n2)
		}
		t.Logf("%-10s sr=%-5v stagnation %.4f", precision, sr, s)
		return s
	}
	for _, c := range []struct {
		precision string
		sr        bool
		lo, hi    float64
	}{
		{config.PrecisionFP32, false, 0, 0.01},
		{config.PrecisionBF16Mixed, false, 0, 0.01},
		{config.PrecisionBF16, false, 0.5, 1},
		{config.PrecisionBF16, true, 0.3, 0.75},
	} {
		if s := share(c.precision, c.sr); !(s >= c.lo && s <= c.hi) || math.IsNaN(s) {
			t.Errorf("%s sr=%v: stagnation %.4f, want in [%g, %g]", c.precision, c.sr, s, c.lo, c.hi)
		}
	}
	if rn, sr := share(config.PrecisionBF16, false), share(config.PrecisionBF16, true); sr > rn-0.05 {
		t.Errorf("stagnation with stochastic rounding %.4f, to nearest %.4f: want stochastic rounding lower by 0.05 or more", sr, rn)
	}
}

// TestStochasticRoundingNeedsBF16: the learner refuses stochastic
// rounding in a mode whose masters are float32, naming the key.
func TestStochasticRoundingNeedsBF16(t *testing.T) {
	o := refOptim
	o.StochasticRounding = true
	for _, p := range []string{config.PrecisionFP32, config.PrecisionBF16Mixed} {
		if _, err := NewLearner(refModel, o, p, 1); err == nil || !strings.Contains(err.Error(), "optim.stochastic_rounding") {
			t.Errorf("precision %s with stochastic rounding: %v, want an error naming optim.stochastic_rounding", p, err)
		}
	}
}
