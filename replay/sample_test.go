package replay

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// chiSquare is Pearson's statistic Σ (O_i − E_i)² / E_i of counts against
// draws·prob.
func chiSquare(counts []int, prob []float64, draws int) float64 {
	s := 0.0
	for i, c := range counts {
		e := float64(draws) * prob[i]
		s += (float64(c) - e) * (float64(c) - e) / e
	}
	return s
}

// normalised returns (v_i^α) / Σ_j v_j^α.
func normalised(v []float64, alpha float64) []float64 {
	out := make([]float64, len(v))
	sum := 0.0
	for i, x := range v {
		out[i] = math.Pow(x, alpha)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// TestSamplingFrequenciesMatchPriorities checks P(i) = p_i^α / Σ p^α with
// Pearson's chi-square goodness-of-fit test at significance 0.001 (fixed
// seeds, so the outcome is deterministic). With batch 1, stratified sampling
// is plain independent sampling and the test has its nominal level; with
// larger batches the draws have a smaller variance than multinomial ones,
// so the test is conservative. Either way it keeps its power: the same
// counts must reject the distributions that ignore α or the priorities.
func TestSamplingFrequenciesMatchPriorities(t *testing.T) {
	const (
		k     = 40
		alpha = 0.6
		eps   = 1e-3
		draws = 148_000
	)
	critical := distuv.ChiSquared{K: k - 1}.Quantile(1 - 0.001)
	for _, batch := range []int{1, 37} { // 37 does not divide k: segments straddle leaves unevenly
		b := mustNew(t, testConfig(64, alpha, eps)) // 64 slots, 40 used
		mustAdd(t, b, 0, k)
		idx := make([]int, k)
		loss := make([]float32, k)
		prio := make([]float64, k) // p_i = loss_i + ε, computed here independently
		for i := range k {
			idx[i] = i
			loss[i] = 0.1 + 0.2*float32(i)
			prio[i] = float64(loss[i]) + eps
		}
		if err := b.UpdatePriorities(idx, loss); err != nil {
			t.Fatal(err)
		}

		rng := rand.New(rand.NewPCG(2016, uint64(batch)))
		counts := make([]int, k)
		sIdx := make([]int, batch)
		w := make([]float32, batch)
		for range draws / batch {
			if err := b.Sample(rng, batch, 0.4, sIdx, w); err != nil {
				t.Fatal(err)
			}
			for _, i := range sIdx {
				if i < 0 || i >= k {
					t.Fatalf("batch %d: sampled index %d outside the %d stored transitions", batch, i, k)
				}
				counts[i]++
			}
		}
		got := chiSquare(counts, normalised(prio, alpha), draws)
		if got > critical {
			t.Fatalf("batch %d: chi-square %.1f > critical %.1f (df %d, p = 0.001): frequencies do not follow p^α/Σp^α; counts %v", batch, got, critical, k-1, counts)
		}
		t.Logf("batch %d: chi-square %.1f, critical %.1f at p = 0.001, df %d", batch, got, critical, k-1)
		for _, alt := range []struct {
			name string
			a    float64
		}{{"alpha 1 (no exponent)", 1}, {"uniform (alpha 0)", 0}} {
			if s := chiSquare(counts, normalised(prio, alt.a), draws); s <= critical {
				t.Fatalf("batch %d: chi-square against %s = %.1f ≤ critical %.1f: the test cannot tell the distributions apart", batch, alt.name, s, critical)
			}
		}
	}
}

// TestImportanceWeightsMatchHandComputation uses α = 1, ε = 0.5 and losses
// 0.5, 0.5, 1.5, 3.5: masses 1, 1, 2, 4, T = 8, N = 4. A batch of 4 splits
// [0, 8) into [0,2) [2,4) [4,6) [6,8), which fall in slot 0 or 1, slot 2,
// slot 3 and slot 3. N·P = 0.5, 1, 2, 2, so w = (N·P)^−β over the batch
// maximum (0.5^−β) is 1, 2^−β, 4^−β, 4^−β.
func TestImportanceWeightsMatchHandComputation(t *testing.T) {
	b := mustNew(t, testConfig(4, 1, 0.5))
	mustAdd(t, b, 0, 4)
	if err := b.UpdatePriorities([]int{0, 1, 2, 3}, []float32{0.5, 0.5, 1.5, 3.5}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for _, tc := range []struct {
		beta float64
		want [4]float64
	}{
		{0, [4]float64{1, 1, 1, 1}},
		{0.5, [4]float64{1, 1 / math.Sqrt2, 0.5, 0.5}},
		{1, [4]float64{1, 0.5, 0.25, 0.25}},
	} {
		for range 20 {
			idx := make([]int, 4)
			w := make([]float32, 4)
			if err := b.Sample(rng, 4, tc.beta, idx, w); err != nil {
				t.Fatal(err)
			}
			if (idx[0] != 0 && idx[0] != 1) || idx[1] != 2 || idx[2] != 3 || idx[3] != 3 {
				t.Fatalf("indices %v, want [0|1 2 3 3]", idx)
			}
			for k := range 4 {
				if want := float32(tc.want[k]); w[k] != want {
					t.Fatalf("beta %v: weights %v, want %v", tc.beta, w, tc.want)
				}
			}
		}
	}
}

// TestImportanceWeightsMatchDefinition compares Sample's weights with
// (N·P(i))^−β / max_batch (N·P(j))^−β computed literally in float64 from
// the losses, for a partly filled buffer with the default α and a mid-run β.
func TestImportanceWeightsMatchDefinition(t *testing.T) {
	const alpha, eps, beta, n = 0.6, 1e-6, 0.55, 50
	b := mustNew(t, testConfig(80, alpha, eps))
	mustAdd(t, b, 0, n)
	rng := rand.New(rand.NewPCG(5, 6))
	idx := make([]int, n)
	loss := make([]float32, n)
	mass := make([]float64, n)
	total := 0.0
	for i := range n {
		idx[i] = i
		loss[i] = float32(rng.ExpFloat64() * 2)
		mass[i] = math.Pow(float64(loss[i])+eps, alpha)
		total += mass[i]
	}
	if err := b.UpdatePriorities(idx, loss); err != nil {
		t.Fatal(err)
	}
	const batch = 16
	sIdx := make([]int, batch)
	w := make([]float32, batch)
	for range 50 {
		if err := b.Sample(rng, batch, beta, sIdx, w); err != nil {
			t.Fatal(err)
		}
		raw := make([]float64, batch)
		maxW := 0.0
		for k, i := range sIdx {
			raw[k] = math.Pow(n*mass[i]/total, -beta)
			maxW = max(maxW, raw[k])
		}
		for k := range batch {
			want := raw[k] / maxW
			if math.Abs(float64(w[k])-want) > 1e-6*want {
				t.Fatalf("weight %d (index %d) = %v, definition gives %v", k, sIdx[k], w[k], want)
			}
		}
	}
}

// topSource always returns the largest uint64, so rng.Float64() gives its
// largest value, 1 − 2⁻⁵³, and u_{B−1} rounds to (or near) the total.
type topSource struct{}

func (topSource) Uint64() uint64 { return math.MaxUint64 }

func TestSampleAtTopOfRangeStaysInFilledSlots(t *testing.T) {
	b := mustNew(t, testConfig(100, 0.6, 1e-6))
	mustAdd(t, b, 0, 7) // slots 7..99 are empty with zero mass
	if err := b.UpdatePriorities([]int{0, 6}, []float32{0.3, 1e-9}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(topSource{})
	for _, batch := range []int{1, 3, 7, 64, 1000} {
		idx := make([]int, batch)
		w := make([]float32, batch)
		if err := b.Sample(rng, batch, 1, idx, w); err != nil {
			t.Fatal(err)
		}
		for k, i := range idx {
			if i < 0 || i >= 7 {
				t.Fatalf("batch %d: idx[%d] = %d is an empty slot", batch, k, i)
			}
			if !(w[k] > 0 && w[k] <= 1) {
				t.Fatalf("batch %d: weight[%d] = %v outside (0, 1]", batch, k, w[k])
			}
		}
	}
}

func TestSampleRejectsBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	empty := mustNew(t, testConfig(4, 0.6, 1e-6))
	if err := empty.Sample(rng, 2, 0.4, make([]int, 2), make([]float32, 2)); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Sample on an empty buffer: error %v, want ErrEmpty", err)
	}
	b := mustNew(t, testConfig(4, 0.6, 1e-6))
	mustAdd(t, b, 0, 2)
	for _, tc := range []struct {
		name  string
		rng   *rand.Rand
		batch int
		beta  float64
		nIdx  int
		nW    int
		want  string
	}{
		{"nil rng", nil, 2, 0.4, 2, 2, "nil rng"},
		{"zero batch", rng, 0, 0.4, 2, 2, "batch 0"},
		{"short idx", rng, 3, 0.4, 2, 3, "idx has 2 entries"},
		{"short weights", rng, 3, 0.4, 3, 1, "weights has 1 entries"},
		{"beta above 1", rng, 2, 1.1, 2, 2, "beta 1.1"},
		{"NaN beta", rng, 2, math.NaN(), 2, 2, "beta NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.Sample(tc.rng, tc.batch, tc.beta, make([]int, tc.nIdx), make([]float32, tc.nW))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Sample error = %v, want ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}

func TestUpdatePrioritiesRejectsBadInputAndChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		idx  []int
		loss []float32
		want string
	}{
		{"length mismatch", []int{0, 1}, []float32{1}, "2 indices but 1 losses"},
		{"NaN loss", []int{0, 2}, []float32{1, float32(math.NaN())}, "loss[1] = NaN for index 2"},
		{"negative loss", []int{1}, []float32{-0.5}, "loss[0] = -0.5 for index 1"},
		{"infinite loss", []int{0}, []float32{float32(math.Inf(1))}, "loss[0] = +Inf"},
		{"index past size", []int{0, 3}, []float32{1, 1}, "idx[1] = 3 outside [0, 3)"},
		{"negative index", []int{-1}, []float32{1}, "idx[0] = -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustNew(t, testConfig(8, 0.6, 1e-6))
			mustAdd(t, b, 0, 3)
			err := b.UpdatePriorities(tc.idx, tc.loss)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("UpdatePriorities error = %v, want ErrInvalid naming %q", err, tc.want)
			}
			if b.Total() != 3 || b.MaxPriority() != 1 {
				t.Fatalf("rejected update changed the buffer: Total %v (want 3), MaxPriority %v (want 1)", b.Total(), b.MaxPriority())
			}
		})
	}
}

func TestBetaAnnealsLinearlyToOne(t *testing.T) {
	for _, tc := range []struct {
		beta0           float64
		step, betaSteps int
		want            float64
	}{
		{0.4, 0, 6000, 0.4},
		{0.4, -5, 6000, 0.4},
		{0.4, 3000, 6000, 0.7},
		{0.4, 1500, 6000, 0.55},
		{0.4, 6000, 6000, 1},
		{0.4, 1_000_000, 6000, 1},
		{0, 1, 4, 0.25},
		{0.4, 10, 0, 1},
	} {
		if got := Beta(tc.beta0, tc.step, tc.betaSteps); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("Beta(%v, %d, %d) = %v, want %v", tc.beta0, tc.step, tc.betaSteps, got, tc.want)
		}
	}
}
