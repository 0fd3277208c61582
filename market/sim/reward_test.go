package sim_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// TestRewardShapingScalesAndChargesTurnoverAndRisk: SetReward with scale
// k, turnover penalty c and risk aversion κ gives
// k·r − k·κ/2·r² − c·|Δ contracts|/MaxContracts for the same steps, where
// r is the unshaped reward and Δ is what the decision trades; an
// unshaped env keeps the plain reward.
func TestRewardShapingScalesAndChargesTurnoverAndRisk(t *testing.T) {
	ds := walkDataset(3, 400)
	r := market.Range{From: 0, To: 400}
	plain, err := sim.NewVecEnv(ds, r, 4, 64, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	shaped, err := sim.NewVecEnv(ds, r, 4, 64, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	const k, c, kappa = 2.5, 0.1, 0.3
	if err := shaped.SetReward(sim.RewardShape{Scale: k, TurnoverPenalty: c, RiskAversion: kappa}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []sim.RewardShape{
		{}, {Scale: 1, TurnoverPenalty: -1}, {Scale: math.Inf(1)}, {Scale: 1, RiskAversion: -0.1},
		{Scale: 1, RiskAversion: math.NaN()}, {Scale: 1, TurnoverPenalty: math.Inf(1)},
	} {
		if shaped.SetReward(bad) == nil {
			t.Errorf("SetReward accepted %+v", bad)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	acts := make([]market.Action, 4)
	var a, b sim.StepResult
	risky := 0
	for range 300 {
		pos := make([]int, 4)
		for i := range acts {
			acts[i] = market.Action{Dir: rng.IntN(3), Size: rng.IntN(4), Exit: rng.IntN(3)}
			pos[i] = plain.Position(i)
		}
		if err := plain.Step(acts, &a); err != nil {
			t.Fatal(err)
		}
		if err := shaped.Step(acts, &b); err != nil {
			t.Fatal(err)
		}
		for i, act := range acts {
			target := 0
			if act.Dir != 1 {
				target = (act.Dir - 1) * max(1, int(math.Round(float64(act.Size+1)/4*4)))
			}
			traded := math.Abs(float64(target - pos[i]))
			x := float64(a.Reward[i])
			want := k*x - k*kappa/2*x*x - c*traded/4
			if math.Abs(float64(b.Reward[i])-want) > 1e-5*max(1, math.Abs(want)) {
				t.Fatalf("env %d: shaped reward %g, want %g·%g − %g·%g/2·%g² − %g·%g/4 = %g", i, b.Reward[i], k, x, k, kappa, x, c, traded, want)
			}
			if k*kappa/2*x*x > 1e-3 {
				risky++
			}
		}
	}
	if risky < 100 {
		t.Errorf("only %d of 1200 steps had a risk term above 1e-3: the test does not exercise it", risky)
	}
}

// TestRiskAversionZeroKeepsTheRewardsBits: with κ 0 the shaped reward is
// the expression of before the term existed, k·ΔE/u − c·|Δ|/M, bit for
// bit, so every result recorded before it stands.
func TestRiskAversionZeroKeepsTheRewardsBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100000 {
		k, c := math.Exp(rng.NormFloat64()), rng.Float64()*0.2
		dE, u := rng.NormFloat64()*math.Exp(3*rng.NormFloat64()), math.Exp(3*rng.NormFloat64())
		traded, m := rng.IntN(9), 1+rng.IntN(8)
		got := sim.ShapedReward(sim.RewardShape{Scale: k, TurnoverPenalty: c}, dE, u, traded, m)
		want := k*dE/u - c*float64(traded)/float64(m)
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("k %g c %g ΔE %g u %g traded %d of %d: %x, want %x", k, c, dE, u, traded, m, math.Float64bits(got), math.Float64bits(want))
		}
	}
}
