package market_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dqnflow/dqnflow/market"
)

// TestRewardShapingScalesAndChargesTurnover: SetReward(k, c) gives
// k·reward − c·|Δ contracts|/MaxContracts for the same steps, where Δ is
// what the decision trades; an unshaped env keeps the plain reward.
func TestRewardShapingScalesAndChargesTurnover(t *testing.T) {
	ds := walkDataset(3, 400)
	r := market.Range{From: 0, To: 400}
	plain, err := market.NewVecEnv(ds, r, 4, 64, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	shaped, err := market.NewVecEnv(ds, r, 4, 64, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	const k, c = 2.5, 0.1
	if err := shaped.SetReward(k, c); err != nil {
		t.Fatal(err)
	}
	if shaped.SetReward(0, 0) == nil || shaped.SetReward(1, -1) == nil || shaped.SetReward(math.Inf(1), 0) == nil {
		t.Error("SetReward accepted a non-positive scale, a negative penalty or an infinite one")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	acts := make([]market.Action, 4)
	var a, b market.StepResult
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
			want := k*float64(a.Reward[i]) - c*traded/4
			if math.Abs(float64(b.Reward[i])-want) > 1e-5*max(1, math.Abs(want)) {
				t.Fatalf("env %d: shaped reward %g, want %g·%g − %g·%g/4 = %g", i, b.Reward[i], k, a.Reward[i], c, traded, want)
			}
		}
	}
}
