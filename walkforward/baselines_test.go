package walkforward

import (
	"math"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
)

// handBars is warmup bars at 100 and then closes, one a day at noon from
// 2020-01-01, each bar opening at the close before (so a fill at the next
// open is at the decision bar's close).
func handBars(warmup int, closes []float64) *prices.Bars {
	c := make([]float64, warmup, warmup+len(closes))
	for i := range c {
		c[i] = 100
	}
	c = append(c, closes...)
	n := len(c)
	b := &prices.Bars{Name: "hand", Time: make([]time.Time, n), Open: make([]float64, n), High: make([]float64, n),
		Low: make([]float64, n), Close: c, Volume: make([]float64, n)}
	t0 := time.Date(2020, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range c {
		b.Time[i] = t0.AddDate(0, 0, i)
		b.Open[i] = c[max(i-1, 0)]
		b.High[i], b.Low[i] = max(b.Open[i], c[i]), min(b.Open[i], c[i])
	}
	return b
}

// costless trades 1 money unit a point, up to 4 contracts, from 1000 of
// capital, without costs.
var costless = market.Instrument{Name: "custom", TickSize: 0.01, PointValue: 1, MaxContracts: 4, InitialCapital: 1000}

// TestMomentumByHand: lookback 2 bars, volatility over 2 log returns,
// target 1 % a bar, on closes 100 (the warmup) then 100, 101, 103, 102,
// 99, 99, 100, 104, 103. At bar t (from the first of those):
//
//	t  close  close−close[t−2]  log returns (t−1, t)  σ_t     min(1, 0.01/σ_t)  contracts
//	0  100     0                                               flat              0
//	1  101    +1                0, 0.00995            0.00704  1                +4
//	2  103    +3                0.00995, 0.01961      0.00683  1                +4
//	3  102    +1                0.01961, −0.00976     0.02076  0.482 → 2/4      +2
//	4   99    −4                −0.00976, −0.02985    0.01421  0.704 → 3/4      −3
//	5   99    −3                −0.02985, 0           0.02111  0.474 → 2/4      −2
//	6  100    +1                0, 0.01005            0.00711  1                +4
//	7  104    +5                0.01005, 0.03922      0.02063  0.485 → 2/4      +2
//	8  103    +3                (the last bar: no decision is filled)
//
// A decision at t is held through bar t+1, so from 1000 the equity moves
// by 0, 4·2, 4·(−1), 2·(−3), −3·0, −2·1, 4·4, 2·(−1): 1000, 1000, 1008,
// 1004, 998, 998, 996, 1012, 1010, and each (daily) return is the move
// over the equity before it.
func TestMomentumByHand(t *testing.T) {
	const w = market.FeatureWarmup
	closes := []float64{100, 101, 103, 102, 99, 99, 100, 104, 103}
	b := handBars(w, closes)
	m := Momentum{Lookback: 2, VolWindow: 2, TargetVol: 0.01}
	wantPos := []int{0, 4, 4, 2, -3, -2, 4, 2}
	for i, want := range wantPos {
		a := m.Action(b.Close, w+i)
		got := 0
		if a.Dir != 1 {
			got = a.Size + 1
			if a.Dir == 0 {
				got = -got
			}
		}
		if got != want {
			t.Errorf("bar %d: action %+v = %d contracts, want %d", i, a, got, want)
		}
	}
	ds, err := market.PrepareWith(b, market.Normalizer{}, costless)
	if err != nil {
		t.Fatal(err)
	}
	r := market.Range{From: w, To: w + len(closes)}
	rep, err := sim.Backtest(ds, r, m.Policy(b))
	if err != nil {
		t.Fatal(err)
	}
	wantEq := []float64{1000, 1000, 1008, 1004, 998, 998, 996, 1012, 1010}
	for i, e := range wantEq {
		if math.Abs(rep.Equity[i]-e) > 1e-9 {
			t.Errorf("equity at bar %d: %g, want %g", i, rep.Equity[i], e)
		}
		if i > 0 && rep.Positions[i] != wantPos[i-1] {
			t.Errorf("position through bar %d: %d, want %d", i, rep.Positions[i], wantPos[i-1])
		}
	}
	res, err := NewResult(Result{Series: "hand", Strategy: StrategyMomentum}, ds, r, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Days) != len(closes) || len(res.Returns) != len(closes) {
		t.Fatalf("%d days, %d returns; want %d (one bar a day)", len(res.Days), len(res.Returns), len(closes))
	}
	for i := range wantEq {
		want := 0.0
		if i > 0 {
			want = wantEq[i]/wantEq[i-1] - 1
		}
		if math.Abs(res.Returns[i]-want) > 1e-12 || res.Days[i] != int32(b.Time[w+i].Unix()/86400) {
			t.Errorf("day %d (%d): return %g, want %g", i, res.Days[i], res.Returns[i], want)
		}
	}
	if math.Abs(res.TotalReturn-0.01) > 1e-12 {
		t.Errorf("total return %g, want 0.01", res.TotalReturn)
	}
}

// TestMomentumFlatWithoutHistory: before Lookback bars or VolWindow
// returns the rule is flat, it is flat where the past return is zero, and
// a series without volatility gets a full position.
func TestMomentumFlatWithoutHistory(t *testing.T) {
	c := []float64{100, 101, 102, 103, 103, 103, 104}
	m := Momentum{Lookback: 3, VolWindow: 2, TargetVol: 0.001}
	for tt, want := range map[int]float64{0: 0, 1: 0, 2: 0, 3: 0.001 / 0.000049} {
		got := m.Position(c, tt)
		if (want == 0) != (got == 0) || math.Abs(got) > 1 {
			t.Errorf("bar %d: position %g, want %g", tt, got, min(want, 1))
		}
	}
	if p := (Momentum{Lookback: 1, VolWindow: 2, TargetVol: 0.001}).Position([]float64{100, 100, 100, 101}, 2); p != 0 {
		t.Errorf("no past return: position %g, want 0", p)
	}
	if p := (Momentum{Lookback: 2, VolWindow: 2, TargetVol: 1e-9}).Position([]float64{100, 110, 121}, 2); math.Abs(p-1) > 1e-12 {
		t.Errorf("returns of equal size (σ 0): position %g, want 1", p)
	}
}

// TestChooseMomentumReadsTheTrainingRangeOnly: changing every bar after
// the training range changes nothing in the choice.
func TestChooseMomentumReadsTheTrainingRangeOnly(t *testing.T) {
	const w = market.FeatureWarmup
	n := 3000
	closes := make([]float64, n)
	x := 100.0
	for i := range closes {
		x *= 1 + 0.01*math.Sin(float64(i)/40)
		closes[i] = x
	}
	b := handBars(w, closes)
	ds, err := market.PrepareWith(b, market.Normalizer{}, costless)
	if err != nil {
		t.Fatal(err)
	}
	train := market.Range{From: w, To: w + 2000}
	a, err := ChooseMomentum(ds, train)
	if err != nil {
		t.Fatal(err)
	}
	for i := train.To; i < b.Len(); i++ {
		b.Close[i] *= 1 + 0.5*math.Cos(float64(i))
	}
	c, err := ChooseMomentum(ds, train)
	if err != nil {
		t.Fatal(err)
	}
	if a != c {
		t.Errorf("choice %+v, after changing bars past the training range %+v", a, c)
	}
	t.Logf("chose %+v", a)
}

// TestMomentumPolicyIsPosition: the policy's running sums take the
// actions Action takes from Position, bar by bar, on a long noisy series.
func TestMomentumPolicyIsPosition(t *testing.T) {
	n := 20000
	c := make([]float64, n)
	x, seed := 100.0, uint64(1)
	for i := range c {
		seed = seed*6364136223846793005 + 1442695040888963407
		u := float64(seed>>11)/float64(1<<53) - 0.5
		x *= math.Exp(0.01*u + 0.002*math.Sin(float64(i)/300))
		c[i] = x
	}
	b := &prices.Bars{Close: c}
	for _, m := range []Momentum{{Lookback: 24, VolWindow: 720, TargetVol: 0.0015}, {Lookback: 500, VolWindow: 20, TargetVol: 0.003}} {
		p := m.Policy(b)
		diff := 0
		for tt := range c {
			if p.Act(tt, nil) != m.Action(c, tt) {
				diff++
			}
		}
		if diff > 0 {
			t.Errorf("%+v: %d of %d bars act otherwise than Action", m, diff, n)
		}
	}
}
