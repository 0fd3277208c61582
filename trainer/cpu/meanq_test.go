package cpu

import (
	"context"
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// TestMeanQIsTheExpectedValueOfTheTakenActions recomputes Train's MeanQ
// from the online network's distributions in float64:
// (1/n) Σ_i (1/3) Σ_d Σ_j z_j p_j(s_i, a_id), z_j = v_min + j·Δz.
func TestMeanQIsTheExpectedValueOfTheTakenActions(t *testing.T) {
	cfg := trainertest.SmallConfig()
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Backend{}.New(context.Background(), cfg, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	st, err := tr.Train(context.Background(), 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.MeanQ == nil {
		t.Fatal("Train reported no mean Q")
	}
	c := tr.(*Trainer)
	n, atoms := len(c.batch.Return), cfg.Model.Atoms
	p := make([]float32, n*model.NumActions*atoms)
	if err := c.learner.Online().Distributions(c.batch.Obs, n, p); err != nil {
		t.Fatal(err)
	}
	dz := (cfg.Model.VMax - cfg.Model.VMin) / float64(atoms-1)
	var want float64
	for i := range n {
		for d := range model.NumBranches {
			a := model.BranchOffset[d] + int(c.batch.Actions[i*model.NumBranches+d])
			for j := range atoms {
				want += (cfg.Model.VMin + float64(j)*dz) * float64(p[(i*model.NumActions+a)*atoms+j])
			}
		}
	}
	want /= float64(n * model.NumBranches)
	if got := *st.MeanQ; math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
		t.Errorf("MeanQ = %.9g, recomputed %.9g", got, want)
	}
}
