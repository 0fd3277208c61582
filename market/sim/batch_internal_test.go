package sim

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// hold is the action that keeps acc's position and exit rule.
func (s *engine) hold(acc *account) market.Action {
	a := market.Action{Dir: 1, Exit: acc.exit}
	if acc.pos == 0 {
		return a
	}
	a.Dir = 2
	if acc.pos < 0 {
		a.Dir = 0
	}
	for k, n := range s.size {
		if n == abs(acc.pos) {
			a.Size = k
		}
	}
	return a
}

// TestHoldStepIsStepWithTheHoldingAction: the batched backtest's chains
// advance a held position with holdStep; on the bundled S&P 500's bars,
// for positions of every direction, size and exit rule, entered at random
// bars, re-stopped now and then and held until stopped or for up to 200
// bars, it leaves the account exactly as step with the action that holds
// it does, bar after bar; a stop exactly at the next bar's extreme is hit.
func TestHoldStepIsStepWithTheHoldingAction(t *testing.T) {
	cfg := config.Defaults()
	cfg.Data.Path = "bundled:USA500IDXUSD_H1.csv"
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := market.Range{From: ds.Warmup, To: ds.Bars.Len()}
	for _, maxContracts := range []int{1, 3, 4} {
		ds.Instrument.MaxContracts = maxContracts
		s, err := newEngine(ds, r)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(maxContracts), 9))
		stopped, steps := 0, 0
		for range 2000 {
			t0 := r.From + rng.IntN(r.Len()-300)
			var acc account
			s.step(&acc, market.Action{Dir: 2 * rng.IntN(2), Size: rng.IntN(market.NumSizes), Exit: rng.IntN(3)}, t0, nil)
			for bar := t0 + 1; bar < t0+200 && acc.pos != 0; bar++ {
				if rng.IntN(20) == 0 { // a new exit rule: a new stop from this close
					a := s.hold(&acc)
					a.Exit = (a.Exit + 1 + rng.IntN(2)) % 3
					s.step(&acc, a, bar, nil)
					continue
				}
				want, got := acc, acc
				s.step(&want, s.hold(&want), bar, nil)
				s.holdStep(&got, bar)
				if got != want {
					t.Fatalf("max contracts %d, bar %d, account %+v: holdStep gives %+v, step with %+v gives %+v",
						maxContracts, bar, acc, got, s.hold(&acc), want)
				}
				acc = want
				steps++
			}
			if acc.pos == 0 {
				stopped++
			}
		}
		// Stops exactly at the next bar's low (long) or high (short): hit.
		for range 200 {
			bar := r.From + rng.IntN(r.Len()-2)
			for _, dir := range []int{1, -1} {
				acc := account{pos: dir * s.size[rng.IntN(market.NumSizes)], entry: ds.Bars.Close[bar], exit: 1 + rng.IntN(2), held: 3}
				acc.stop = ds.Bars.Low[bar+1]
				if dir < 0 {
					acc.stop = ds.Bars.High[bar+1]
				}
				want, got := acc, acc
				s.step(&want, s.hold(&want), bar, nil)
				s.holdStep(&got, bar)
				if got != want || got.pos != 0 {
					t.Fatalf("max contracts %d, bar %d, account %+v stopped at the bar's extreme: holdStep gives %+v, step %+v",
						maxContracts, bar, acc, got, want)
				}
			}
		}
		if stopped < 100 || steps < 10000 {
			t.Errorf("max contracts %d: %d positions stopped and %d held steps: the case tests too little", maxContracts, stopped, steps)
		}
	}
}
