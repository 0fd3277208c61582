package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dqnflow/dqnflow/config"
)

// supportOf returns the float32 support and Δz of model m as a Net has them.
func supportOf(t *testing.T, m config.ModelConfig) *Net {
	t.Helper()
	n, err := newNet(m, config.PrecisionFP32)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// projectOnto runs project for p on the net's support.
func projectOnto(n *Net, p []float32, ret, discount float32) []float32 {
	m := make([]float32, len(p))
	project(p, n.support, ret, discount, n.vmin, n.vmax, n.dz, m)
	return m
}

// TestC51ProjectionConservesMass checks that the projected distribution
// sums to one and matches the float64 reference projection, for random
// distributions, returns inside and far outside the support, and
// discounts from 0 to 1.
func TestC51ProjectionConservesMass(t *testing.T) {
	m := config.ModelConfig{Trunk1: 1, Trunk2: 1, Head: 1, Atoms: 51, VMin: -10, VMax: 10}
	n := supportOf(t, m)
	z := refSupport(m)
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 500; trial++ {
		p := make([]float32, m.Atoms)
		logits := make([]float32, m.Atoms)
		for j := range logits {
			logits[j] = float32(3 * r.NormFloat64())
		}
		logSoftmax(logits, p)
		ret := float32(40*r.Float64() - 20)
		disc := float32(r.Float64())
		got := projectOnto(n, p, ret, disc)
		p64 := make([]float64, len(p))
		var sum float64
		for j, x := range p {
			p64[j] = float64(x)
		}
		want := refProject(p64, z, float64(ret), float64(disc))
		for j, x := range got {
			sum += float64(x)
			// b = (Tz − v_min)/Δz ≤ 50 carries a float32 rounding error of up
			// to ~50·2⁻²⁴ ≈ 3e-6, which moves that much mass between l and u.
			if d := math.Abs(float64(x) - want[j]); d > 1e-5 {
				t.Fatalf("trial %d (R %g, discount %g): m[%d] = %.8g, reference %.8g", trial, ret, disc, j, x, want[j])
			}
		}
		var psum float64
		for _, x := range p {
			psum += float64(x)
		}
		if math.Abs(sum-psum) > 1e-6 || math.Abs(sum-1) > 1e-6 {
			t.Fatalf("trial %d (R %g, discount %g): Σm = %.9g, Σp = %.9g, want 1 ± 1e-6", trial, ret, disc, sum, psum)
		}
	}
}

// TestC51ProjectionCases checks hand-worked projections on the support
// −5, −4, …, 5 (Δz = 1).
func TestC51ProjectionCases(t *testing.T) {
	n := supportOf(t, refModel) // 11 atoms from −5 to 5
	p := []float32{0.05, 0.1, 0.15, 0.2, 0.1, 0.05, 0.05, 0.1, 0.1, 0.05, 0.05}
	shifted := func(k int) []float32 { // R = k, discount 1: atom j lands on atom j+k exactly (l = u)
		m := make([]float32, len(p))
		for j, x := range p {
			m[min(max(j+k, 0), len(p)-1)] += x
		}
		return m
	}
	atom := func(j int, mass ...float32) []float32 {
		m := make([]float32, len(p))
		for k, x := range mass {
			m[j+k] = x
		}
		return m
	}
	for _, c := range []struct {
		name      string
		ret, disc float32
		want      []float32
	}{
		{"integer b keeps the whole mass (l = u)", 2, 1, shifted(2)},
		{"negative integer shift", -3, 1, shifted(-3)},
		{"large positive return clips to v_max", 1000, 0.97, atom(10, 1)},
		{"large negative return clips to v_min", -1000, 0.97, atom(0, 1)},
		{"done puts all mass at R (on an atom)", 1, 0, atom(6, 1)},
		{"done puts all mass at R (between atoms)", 1.25, 0, atom(6, 0.75, 0.25)},
		{"done with R beyond v_max", 7, 0, atom(10, 1)},
	} {
		got := projectOnto(n, p, c.ret, c.disc)
		for j := range got {
			if math.Abs(float64(got[j]-c.want[j])) > 1e-6 { // Σp = 1 ± 1.2e-7 in float32

				t.Errorf("%s: m = %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}

// TestDuelingHandWorked checks the dueling aggregation and the softmax
// against values worked out by hand: V = (1, 2), three actions with
// A = ((1, 0), (2, 3), (3, −3)), so mean_a A = (2, 0) and
// L = ((0, 2), (1, 5), (2, −1)).
func TestDuelingHandWorked(t *testing.T) {
	v := []float32{1, 2}
	adv := []float32{1, 0, 2, 3, 3, -3}
	got := make([]float32, 6)
	dueling(v, adv, 3, make([]float32, 2), got)
	want := []float32{0, 2, 1, 5, 2, -1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("logits = %v, want %v", got, want)
		}
	}
	// L = (0, ln 3): p = (1/4, 3/4), log p = (−ln 4, ln 3 − ln 4).
	l := []float32{0, float32(math.Log(3))}
	p := make([]float32, 2)
	logSoftmax(l, p)
	for j, w := range []float64{0.25, 0.75} {
		if math.Abs(float64(p[j])-w) > 1e-7 {
			t.Errorf("p[%d] = %.9g, want %g", j, p[j], w)
		}
		if math.Abs(float64(l[j])-math.Log(w)) > 1e-7 {
			t.Errorf("log p[%d] = %.9g, want %.9g", j, l[j], math.Log(w))
		}
	}
	// Expected value on the support (−1, 1): Q = −1/4 + 3/4 = 1/2.
	q := make([]float32, 1)
	expected(p, []float32{-1, 1}, q)
	if math.Abs(float64(q[0])-0.5) > 1e-7 {
		t.Errorf("Q = %.9g, want 0.5", q[0])
	}
}

// TestLogSoftmaxIsStable checks that huge logits give the exact softmax
// instead of Inf or NaN.
func TestLogSoftmaxIsStable(t *testing.T) {
	l := []float32{1e30, 1e30, -1e30}
	p := make([]float32, 3)
	logSoftmax(l, p)
	if p[0] != 0.5 || p[1] != 0.5 || p[2] != 0 || l[0] != float32(-math.Log(2)) {
		t.Errorf("softmax of (1e30, 1e30, −1e30) = %v, log %v; want (0.5, 0.5, 0), log(0.5)", p, l)
	}
}

// TestExp32IsAccurate checks exp32 against math.Exp on every 256th float32
// in [expMin, 0] and on the edges: within 2 ulp of the correctly rounded
// value, 0 below expMin, NaN kept, exactly 1 at 0.
func TestExp32IsAccurate(t *testing.T) {
	worst := 0.0
	check := func(x float32) {
		got, want := float64(exp32(x)), math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), 2)) - float64(float32(want))
		if d := math.Abs(got-want) / ulp; d > worst {
			worst = d
		}
	}
	for b := math.Float32bits(expMin); b > 0x80000000; b -= 256 { // negative floats, decreasing magnitude
		check(math.Float32frombits(b))
	}
	check(expMin)
	t.Logf("max error %.2f ulp", worst)
	if worst > 2 {
		t.Errorf("exp32 is %.2f ulp from e^x", worst)
	}
	if exp32(0) != 1 || exp32(-100) != 0 || !math.IsNaN(float64(exp32(float32(math.NaN())))) || exp32(float32(math.Inf(-1))) != 0 {
		t.Errorf("exp32(0, -100, NaN, -Inf) = %g, %g, %g, %g", exp32(0), exp32(-100), exp32(float32(math.NaN())), exp32(float32(math.Inf(-1))))
	}
}

// TestPositiveMasksExactlyTheNonPositive checks the branch-free ReLU mask.
func TestPositiveMasksExactlyTheNonPositive(t *testing.T) {
	for _, h := range []float32{0, float32(math.Copysign(0, -1)), 1e-45, 1, 3.4e38, float32(math.Inf(1)), float32(math.NaN()), -1, float32(math.Inf(-1))} {
		want := uint32(0)
		if h > 0 {
			want = 0xffffffff
		}
		if got := positive(h); got != want {
			t.Errorf("positive(%g) = %#x, want %#x", h, got, want)
		}
	}
}

// TestSoftmaxIsLogSoftmaxsProbabilities checks that softmax gives the same
// bits as logSoftmax's probabilities.
func TestSoftmaxIsLogSoftmaxsProbabilities(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for k := 0; k < 100; k++ {
		l := make([]float32, 51)
		for j := range l {
			l[j] = float32(5 * r.NormFloat64())
		}
		p1, p2 := make([]float32, 51), make([]float32, 51)
		softmax(l, p1)
		logSoftmax(append([]float32(nil), l...), p2)
		for j := range p1 {
			if math.Float32bits(p1[j]) != math.Float32bits(p2[j]) {
				t.Fatalf("case %d atom %d: softmax %g, logSoftmax %g", k, j, p1[j], p2[j])
			}
		}
	}
}
