package stats_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/stats"
)

// newRNG is the tests' random stream: explicit seeds, so every statistical
// test is deterministic and either always passes or always fails.
func newRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0xda3e39cb94b95bdb))
}

// ar1 simulates n returns r_t = mu + e_t with e_t = phi·e_{t−1} + sigmaU·u_t,
// u_t iid standard normal, e_0 drawn from the stationary distribution
// N(0, sigmaU²/(1 − phi²)). The true per-bar Sharpe ratio is mu/σ_e with
// σ_e = sigmaU/√(1 − phi²) (see ar1Sharpe).
func ar1(rng *rand.Rand, n int, mu, phi, sigmaU float64) []float64 {
	r := make([]float64, n)
	e := rng.NormFloat64() * sigmaU / math.Sqrt(1-phi*phi)
	for t := range r {
		if t > 0 {
			e = phi*e + sigmaU*rng.NormFloat64()
		}
		r[t] = mu + e
	}
	return r
}

// ar1Sharpe is the true per-bar Sharpe ratio of ar1's returns.
func ar1Sharpe(mu, phi, sigmaU float64) float64 {
	return mu / (sigmaU / math.Sqrt(1-phi*phi))
}

// wantInputErr fails unless err wraps stats.ErrInput and its message holds
// every one of parts (the argument, the position, the reason).
func wantInputErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	if !errors.Is(err, stats.ErrInput) {
		t.Errorf("error %q does not wrap stats.ErrInput", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

// near reports whether got is within tol (absolute) of want.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }
