package sim_test

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
)

// ohlc is one hand-written bar.
type ohlc struct{ o, h, l, c float64 }

// handDataset builds a Dataset from hand-written bars with a constant ATR,
// zero features, hourly times and the whole series as Train and Valid.
func handDataset(bars []ohlc, atr float64, in market.Instrument) *market.Dataset {
	n := len(bars)
	b := &prices.Bars{Name: "hand", Time: make([]time.Time, n), Open: make([]float64, n), High: make([]float64, n),
		Low: make([]float64, n), Close: make([]float64, n), Volume: make([]float64, n)}
	t0 := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	a := make([]float64, n)
	for i, x := range bars {
		b.Time[i] = t0.Add(time.Duration(i) * time.Hour)
		b.Open[i], b.High[i], b.Low[i], b.Close[i] = x.o, x.h, x.l, x.c
		a[i] = atr
	}
	return &market.Dataset{
		Bars: b, ATR: a, Features: make([]float32, n*market.NumFeatures),
		Train: market.Range{From: 0, To: n}, Valid: market.Range{From: 0, To: n},
		Instrument: in, BarsPerYear: 4,
	}
}

// walkDataset is a seeded random walk of n bars with gaps, wicks and an
// ATR that varies, for property tests.
func walkDataset(seed uint64, n int) *market.Dataset {
	rng := rand.New(rand.NewPCG(seed, 7))
	bars := make([]ohlc, n)
	c := 1000.0
	for i := range bars {
		o := c + rng.NormFloat64()*0.5
		c = o + rng.NormFloat64()*3
		bars[i] = ohlc{o, max(o, c) + rng.ExpFloat64(), min(o, c) - rng.ExpFloat64(), c}
	}
	ds := handDataset(bars, 0, market.Instrument{TickSize: 0.25, SlippageTicks: 1, Commission: 0.62,
		PointValue: 5, MaxContracts: 4, InitialCapital: 100000})
	for i := range ds.ATR {
		ds.ATR[i] = 2 + float64(i%7)*0.5
	}
	for i := range ds.Features {
		ds.Features[i] = float32(i%97) / 97
	}
	return ds
}

func newEnv(t *testing.T, ds *market.Dataset, r market.Range, n, episode int) *sim.VecEnv {
	t.Helper()
	e, err := sim.NewVecEnv(ds, r, n, episode, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// handEnv is one env over all of bars (handDataset), one episode long.
func handEnv(t *testing.T, bars []ohlc, atr float64, in market.Instrument) *sim.VecEnv {
	t.Helper()
	return newEnv(t, handDataset(bars, atr, in), market.Range{From: 0, To: len(bars)}, 1, len(bars))
}

func step(t *testing.T, e *sim.VecEnv, res *sim.StepResult, a ...market.Action) {
	t.Helper()
	if err := e.Step(a, res); err != nil {
		t.Fatal(err)
	}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*max(1, math.Abs(b)) }

var (
	long2 = market.Action{Dir: 2, Size: 1}
	flat  = market.Action{Dir: 1}
)

// TestLongFillRewardIsHandComputed follows one long of 2 contracts over a
// 4-bar episode: fill at the open plus slippage, commission, the gap, the
// mark to the close and the liquidation at the end of the window.
func TestLongFillRewardIsHandComputed(t *testing.T) {
	// s = 2 ticks × 0.25 = 0.5, commission 1, PV 10, max 4, ATR 2:
	// reward scale = 2·10·4 = 80.
	in := market.Instrument{TickSize: 0.25, SlippageTicks: 2, Commission: 1, PointValue: 10, MaxContracts: 4, InitialCapital: 1e5}
	e := handEnv(t, []ohlc{{100, 101, 99, 100}, {101, 103, 100.5, 102}, {102.5, 104, 102, 103.5}, {103, 104, 102, 102}}, 2, in)
	var res sim.StepResult

	// t0→t1: buy 2 at 101 + 0.5: ΔE = −2·(0.5·10 + 1) + 2·(102 − 101)·10 = −12 + 20 = 8; 8/80 = 0.1.
	step(t, e, &res, long2)
	if res.Reward[0] != 0.1 || res.Done[0] || res.NextBar[0] != 1 {
		t.Fatalf("step 1: reward %v done %v next bar %d, want 0.1 false 1", res.Reward[0], res.Done[0], res.NextBar[0])
	}
	// Agent at bar 1: 2/4 signed and unsigned, long, unrealised
	// (102 − 101.5)/2 = 0.25 ATR, held 1/256, no stop.
	want := []float32{0.5, 0.5, 1, 0, 0.25, 1.0 / 256, 0, 0}
	for k, w := range want {
		if res.NextAgent[k] != w {
			t.Errorf("agent feature %d = %v, want %v (all %v)", k, res.NextAgent[k], w, res.NextAgent)
		}
	}
	// t1→t2: gap 2·(102.5 − 102)·10 = 10, mark 2·(103.5 − 102.5)·10 = 20; 30/80 = 0.375.
	step(t, e, &res, long2)
	if res.Reward[0] != 0.375 || res.Done[0] {
		t.Fatalf("step 2: reward %v done %v, want 0.375 false", res.Reward[0], res.Done[0])
	}
	// t2→t3 ends the 4-bar window: gap 2·(103 − 103.5)·10 = −10, mark
	// 2·(102 − 103)·10 = −20, sell 2 at 102 − 0.5 with commission: −12;
	// −42/80 = −0.525. The episode made −4 = 2 round-trip slippages
	// cancelled by the price move (101.5 in, 101.5 out) minus 4 commission.
	step(t, e, &res, long2)
	if !near(float64(res.Reward[0]), -0.525, 1e-7) || !res.Done[0] || res.Episodes != 1 {
		t.Fatalf("step 3: reward %v done %v episodes %d, want -0.525 true 1", res.Reward[0], res.Done[0], res.Episodes)
	}
	for k, v := range res.NextAgent {
		if v != 0 {
			t.Errorf("after liquidation agent feature %d = %v, want 0", k, v)
		}
	}
	if e.Bar(0) != 0 || e.Position(0) != 0 || e.EpisodesDone() != 1 {
		t.Errorf("after reset: bar %d position %d episodes %d, want 0 0 1", e.Bar(0), e.Position(0), e.EpisodesDone())
	}
}

// TestStops checks a stop hit inside the bar, a gap through the stop that
// fills at the open, and the short side. s = 0.25, commission 0.5, PV 2,
// max 4 (size 3 = 4 contracts), ATR 1: reward scale = 1·2·4 = 8.
func TestStops(t *testing.T) {
	in := market.Instrument{TickSize: 0.25, SlippageTicks: 1, Commission: 0.5, PointValue: 2, MaxContracts: 4, InitialCapital: 1e5}
	cases := []struct {
		name    string
		bars    []ohlc
		act     market.Action
		rewards []float32
		pos     []int
	}{{
		// Buy 4 at 100.25, stop 100.25 − 1 = 99.25; low 98 hits it: exit at
		// min(100, 99.25) − 0.25 = 99. ΔE = −4·(0.25·2 + 0.5) + 4·(99 − 100)·2
		// − 4·0.5 = −4 − 8 − 2 = −14; −14/8 = −1.75.
		name: "long stopped inside the bar", act: market.Action{Dir: 2, Size: 3, Exit: 1},
		bars:    []ohlc{{100, 100, 100, 100}, {100, 100.5, 98, 99}, {99, 99, 99, 99}, {99, 99, 99, 99}},
		rewards: []float32{-1.75}, pos: []int{0},
	}, {
		// Step 1: buy 4 at 100.25, stop 99.25, low 99.8 holds: ΔE = −4 +
		// 4·(100.5 − 100)·2 = 0. Step 2 opens at 98, below the stop: exit at
		// min(98, 99.25) − 0.25 = 97.75. ΔE = 4·(98 − 100.5)·2 + 4·(97.75 − 98)·2
		// − 4·0.5 = −20 − 2 − 2 = −24; −24/8 = −3.
		name: "long gap through the stop fills at the open", act: market.Action{Dir: 2, Size: 3, Exit: 1},
		bars:    []ohlc{{100, 100, 100, 100}, {100, 101, 99.8, 100.5}, {98, 99, 97, 98.5}, {98, 98, 98, 98}, {98, 98, 98, 98}},
		rewards: []float32{0, -3}, pos: []int{4, 0},
	}, {
		// Sell 4 at 99.75, stop 99.75 + 2·1 = 101.75; high 102 hits it: exit
		// at max(100, 101.75) + 0.25 = 102. ΔE = −4 + (−4)·(102 − 100)·2 − 2
		// = −4 − 16 − 2 = −22; −22/8 = −2.75.
		name: "short stopped at 2 ATR", act: market.Action{Dir: 0, Size: 3, Exit: 2},
		bars:    []ohlc{{100, 100, 100, 100}, {100, 102, 99, 101}, {101, 101, 101, 101}, {101, 101, 101, 101}},
		rewards: []float32{-2.75}, pos: []int{0},
	}, {
		// Step 1: sell 4 at 99.75, stop 99.75 + 1 = 100.75, high 100.5 holds:
		// ΔE = −4 + (−4)·(99.5 − 100)·2 = 0. Step 2 opens at 102, above the
		// stop: exit at max(102, 100.75) + 0.25 = 102.25. ΔE = −4·(102 − 99.5)·2
		// − 4·(102.25 − 102)·2 − 4·0.5 = −20 − 2 − 2 = −24; −24/8 = −3.
		name: "short gap through the stop fills at the open", act: market.Action{Dir: 0, Size: 3, Exit: 1},
		bars:    []ohlc{{100, 100, 100, 100}, {100, 100.5, 99, 99.5}, {102, 103, 101.5, 102.5}, {102, 102, 102, 102}, {102, 102, 102, 102}},
		rewards: []float32{0, -3}, pos: []int{-4, 0},
	}, {
		// Sell 4 at 99.75, stop 101.75; high 101.5 holds: ΔE = −4 +
		// (−4)·(98 − 100)·2 = 12; 12/8 = 1.5.
		name: "short stop not reached", act: market.Action{Dir: 0, Size: 3, Exit: 2},
		bars:    []ohlc{{100, 100, 100, 100}, {100, 101.5, 97, 98}, {98, 98, 98, 98}, {98, 98, 98, 98}},
		rewards: []float32{1.5}, pos: []int{-4},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := handEnv(t, c.bars, 1, in)
			var res sim.StepResult
			for k, want := range c.rewards {
				step(t, e, &res, c.act)
				if res.Reward[0] != want || e.Position(0) != c.pos[k] {
					t.Errorf("step %d: reward %v position %d, want %v %d", k+1, res.Reward[0], e.Position(0), want, c.pos[k])
				}
			}
		})
	}
}

// TestHeldStopMovesOnlyWhenExitRuleChanges: repeating the action keeps the
// stop placed at the fill; another exit rule re-places it from the close
// of the decision bar; rule 0 removes it.
func TestHeldStopMovesOnlyWhenExitRuleChanges(t *testing.T) {
	in := market.Instrument{TickSize: 0.5, SlippageTicks: 1, Commission: 0, PointValue: 1, MaxContracts: 2, InitialCapital: 1e5}
	bars := []ohlc{{100, 100, 100, 100}, {100, 101, 100, 101}, {101, 103, 101, 103}, {103, 104, 103, 104}, {104, 105, 104, 105}, {105, 105, 105, 105}}
	e := handEnv(t, bars, 1.5, in)
	var res sim.StepResult
	for k, c := range []struct {
		exit int
		stop float64
	}{
		{2, 97.5},  // buy at 100 + 0.5, stop 100.5 − 2·1.5
		{2, 97.5},  // same rule: unchanged although the price rose
		{1, 101.5}, // new rule at bar 2: close 103 − 1.5
		{0, 0},     // no stop
	} {
		step(t, e, &res, market.Action{Dir: 2, Size: 3, Exit: c.exit})
		s := e.State()
		if s.Stop[0] != c.stop || s.Exit[0] != int64(c.exit) || s.Entry[0] != 100.5 || s.Position[0] != 2 {
			t.Errorf("step %d: stop %v exit %d entry %v position %d, want %v %d 100.5 2", k+1, s.Stop[0], s.Exit[0], s.Entry[0], s.Position[0], c.stop, c.exit)
		}
	}
}

// TestAddingAveragesTheEntry: adding contracts averages the entry price
// by contracts, reducing keeps it. s = 0.5, no commission, ATR 1.
func TestAddingAveragesTheEntry(t *testing.T) {
	in := market.Instrument{TickSize: 0.5, SlippageTicks: 1, PointValue: 1, MaxContracts: 4, InitialCapital: 1e5}
	bars := []ohlc{{100, 100, 100, 100}, {101, 102, 101, 102}, {103, 104, 103, 103.5}, {103, 104, 103, 104}, {104, 104, 104, 104}}
	e := handEnv(t, bars, 1, in)
	var res sim.StepResult
	for k, c := range []struct {
		size   int
		entry  float64
		unreal float32
	}{
		{0, 101.5, 0.5},                          // buy 1 at 101.5; (102 − 101.5)/1
		{2, 308.5 / 3, float32(103.5 - 308.5/3)}, // buy 2 more at 103.5: (101.5 + 2·103.5)/3
		{0, 308.5 / 3, float32(104 - 308.5/3)},   // sell 2 at 102.5: entry kept
	} {
		step(t, e, &res, market.Action{Dir: 2, Size: c.size})
		if s := e.State(); s.Entry[0] != c.entry || res.NextAgent[4] != c.unreal || s.Held[0] != int64(k+1) {
			t.Errorf("step %d: entry %v unrealised %v held %d, want %v %v %d", k+1, s.Entry[0], res.NextAgent[4], s.Held[0], c.entry, c.unreal, k+1)
		}
	}
}

// TestReversalTradesBothLegs: long 2 → short 2 fills 4 contracts. Prices
// never move and slippage is 0, so rewards are commissions only: opening
// −2·1.5 = −3, reversing −4·1.5 = −6, scale 1·1·2 = 2.
func TestReversalTradesBothLegs(t *testing.T) {
	in := market.Instrument{TickSize: 1, SlippageTicks: 0, Commission: 1.5, PointValue: 1, MaxContracts: 2, InitialCapital: 1e5}
	bars := []ohlc{{100, 100, 100, 100}, {100, 100, 100, 100}, {100, 100, 100, 100}, {100, 100, 100, 100}}
	e := handEnv(t, bars, 1, in)
	var res sim.StepResult
	step(t, e, &res, market.Action{Dir: 2, Size: 3})
	if res.Reward[0] != -1.5 {
		t.Errorf("open long 2: reward %v, want -1.5", res.Reward[0])
	}
	step(t, e, &res, market.Action{Dir: 0, Size: 3})
	if res.Reward[0] != -3 || e.Position(0) != -2 {
		t.Errorf("reverse to short 2: reward %v position %d, want -3 -2", res.Reward[0], e.Position(0))
	}
	if s := e.State(); s.Held[0] != 1 || s.Entry[0] != 100 {
		t.Errorf("reversal: held %d entry %v, want a new trade (1, 100)", s.Held[0], s.Entry[0])
	}
}

// TestFlatEarnsNothing: a flat agent has zero reward and zero agent
// features whatever the prices do.
func TestFlatEarnsNothing(t *testing.T) {
	ds := walkDataset(3, 200)
	e := newEnv(t, ds, market.Range{From: 10, To: 200}, 4, 32)
	var res sim.StepResult
	acts := []market.Action{flat, {Dir: 1, Size: 3, Exit: 2}, flat, flat}
	for k := range 100 {
		step(t, e, &res, acts...)
		for i := range 4 {
			if res.Reward[i] != 0 {
				t.Fatalf("step %d env %d: reward %v, want 0", k, i, res.Reward[i])
			}
		}
		for j, v := range res.NextAgent {
			if v != 0 {
				t.Fatalf("step %d: agent value %d = %v, want 0", k, j, v)
			}
		}
	}
}

// TestSizesRoundToWholeContracts: size k is max(1, round((k+1)/4·max)).
func TestSizesRoundToWholeContracts(t *testing.T) {
	for _, c := range []struct {
		max  int
		want [4]int
	}{{1, [4]int{1, 1, 1, 1}}, {2, [4]int{1, 1, 2, 2}}, {4, [4]int{1, 2, 3, 4}}, {10, [4]int{3, 5, 8, 10}}} {
		in := market.Instrument{TickSize: 1, PointValue: 1, MaxContracts: c.max, InitialCapital: 1}
		ds := handDataset([]ohlc{{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, 1, in)
		for k, w := range c.want {
			e := newEnv(t, ds, market.Range{From: 0, To: 3}, 2, 3)
			var res sim.StepResult
			step(t, e, &res, market.Action{Dir: 2, Size: k}, market.Action{Dir: 0, Size: k})
			if e.Position(0) != w || e.Position(1) != -w {
				t.Errorf("max %d size %d: long %d short %d, want ±%d", c.max, k, e.Position(0), e.Position(1), w)
			}
		}
	}
}

// TestZeroATRGivesFiniteReward: with ATR 0 the scale uses the tick size
// (0.25): buy 1 at 100 (s = 0), close 101: ΔE = 1, scale 0.25·1·1.
func TestZeroATRGivesFiniteReward(t *testing.T) {
	in := market.Instrument{TickSize: 0.25, PointValue: 1, MaxContracts: 1, InitialCapital: 1}
	e := handEnv(t, []ohlc{{100, 100, 100, 100}, {100, 101, 100, 101}, {101, 101, 101, 101}}, 0, in)
	var res sim.StepResult
	step(t, e, &res, market.Action{Dir: 2, Exit: 2})
	if res.Reward[0] != 4 {
		t.Errorf("reward %v, want 4", res.Reward[0])
	}
}

// TestWindowsFitTheRange: starts are uniform over r.From … r.To−L, every
// episode is L−1 steps, and a range shorter than L is used whole.
func TestWindowsFitTheRange(t *testing.T) {
	ds := walkDataset(4, 60)
	r := market.Range{From: 20, To: 30} // 10 bars, L = 8: starts 20, 21, 22
	e := newEnv(t, ds, r, 3, 8)
	seen := map[int]int{}
	var res sim.StepResult
	acts := []market.Action{long2, flat, {Dir: 0}}
	steps := make([]int, 3)
	for range 7 * 300 {
		step(t, e, &res, acts...)
		for i := range 3 {
			steps[i]++
			if res.Done[i] {
				if steps[i] != 7 {
					t.Fatalf("env %d: episode of %d steps, want 7", i, steps[i])
				}
				if got := int(res.NextBar[i]); got < 27 || got > 29 {
					t.Fatalf("env %d: window ended at bar %d, want 27…29 (start + 7)", i, got)
				}
				steps[i] = 0
				seen[e.Bar(i)]++
			}
		}
	}
	for s, k := range seen {
		if s < 20 || s > 22 {
			t.Errorf("window start %d outside [20, 22]", s)
		}
		if k < 200 || k > 400 { // 900 episodes over 3 starts: 300 ± 5σ (σ ≈ 14)
			t.Errorf("start %d drawn %d times of 900, want about 300", s, k)
		}
	}
	if len(seen) != 3 {
		t.Errorf("starts drawn %v, want 20, 21 and 22", seen)
	}
	short := newEnv(t, ds, r, 1, 50) // whole range: 9 steps
	for k := range 9 {
		step(t, short, &res, flat)
		if res.Done[0] != (k == 8) {
			t.Fatalf("whole-range episode: step %d done %v", k+1, res.Done[0])
		}
	}
}

// TestObserveLaysOutFeaturesThenAgent: each env's row is its bar's features
// followed by its agent features.
func TestObserveLaysOutFeaturesThenAgent(t *testing.T) {
	ds := walkDataset(5, 100)
	for i := range ds.ATR {
		ds.ATR[i] = 50 // the short's 2-ATR stop stays far away
	}
	e := newEnv(t, ds, market.Range{From: 0, To: 100}, 3, 20)
	var res sim.StepResult
	step(t, e, &res, long2, flat, market.Action{Dir: 0, Size: 3, Exit: 2})
	obs := make([]float32, 3*market.ObsDim)
	if err := e.Observe(obs); err != nil {
		t.Fatal(err)
	}
	agent := make([]float32, market.NumAgentFeatures)
	for i := range 3 {
		row := obs[i*market.ObsDim : (i+1)*market.ObsDim]
		b := e.Bar(i)
		for j := range market.NumFeatures {
			if row[j] != ds.Features[b*market.NumFeatures+j] {
				t.Fatalf("env %d feature %d = %v, want bar %d's %v", i, j, row[j], b, ds.Features[b*market.NumFeatures+j])
			}
		}
		if err := e.Agent(i, agent); err != nil {
			t.Fatal(err)
		}
		for j, v := range agent {
			if row[market.NumFeatures+j] != v || res.NextAgent[i*market.NumAgentFeatures+j] != v {
				t.Fatalf("env %d agent %d: observe %v, agent %v, step %v", i, j, row[market.NumFeatures+j], v, res.NextAgent[i*market.NumAgentFeatures+j])
			}
		}
	}
	// The short with a 2-ATR stop: features 3 (short) and 7 (exit 2/2).
	if a := obs[2*market.ObsDim+market.NumFeatures:]; a[0] != -1 || a[3] != 1 || a[7] != 1 || a[6] <= 0 {
		t.Errorf("short agent features %v: want −1 position, short flag, exit 1, positive stop distance", a[:8])
	}
	if err := e.Observe(obs[:10]); err == nil {
		t.Error("Observe into a short slice: no error")
	}
}

// TestResumeIsBitIdentical: K steps, save the state and the random source,
// M more steps; a new environment restored from the saved state and source
// repeats the M steps bit for bit.
func TestResumeIsBitIdentical(t *testing.T) {
	ds := walkDataset(6, 400)
	r := market.Range{From: 30, To: 400}
	const n, k, m = 5, 37, 120
	acts := make([][]market.Action, k+m)
	ar := rand.New(rand.NewPCG(9, 9))
	for s := range acts {
		for range n {
			acts[s] = append(acts[s], market.Action{Dir: ar.IntN(3), Size: ar.IntN(4), Exit: ar.IntN(3)})
		}
	}
	src := rand.NewPCG(11, 12)
	e, err := sim.NewVecEnv(ds, r, n, 24, rand.New(src))
	if err != nil {
		t.Fatal(err)
	}
	var res sim.StepResult
	for s := range k {
		step(t, e, &res, acts[s]...)
	}
	saved := e.State()
	rngState, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	run := func(e *sim.VecEnv) (bits []uint32) {
		obs := make([]float32, n*market.ObsDim)
		for s := k; s < k+m; s++ {
			step(t, e, &res, acts[s]...)
			if err := e.Observe(obs); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				bits = append(bits, math.Float32bits(res.Reward[i]), uint32(res.NextBar[i]), math.Float32bits(obs[i*market.ObsDim+market.NumFeatures+4]))
			}
		}
		return bits
	}
	first := run(e)

	src2 := rand.NewPCG(0, 0)
	e2, err := sim.NewVecEnv(ds, r, n, 24, rand.New(src2))
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.SetState(saved); err != nil {
		t.Fatal(err)
	}
	if err := src2.UnmarshalBinary(rngState); err != nil {
		t.Fatal(err)
	}
	if got := e2.State(); !reflect.DeepEqual(got, saved) {
		t.Fatalf("State after SetState differs from the state set:\n%+v\n%+v", got, saved)
	}
	second := run(e2)
	for j := range first {
		if first[j] != second[j] {
			t.Fatalf("value %d differs after resume: %#x vs %#x", j, first[j], second[j])
		}
	}
	if s1, s2 := e.State(), e2.State(); !reflect.DeepEqual(s1, s2) {
		t.Errorf("states differ after the same steps:\n%+v\n%+v", s1, s2)
	}
	if e.EpisodesDone() != e2.EpisodesDone() || e.EpisodesDone() == 0 {
		t.Errorf("episodes %d vs %d, want equal and positive", e.EpisodesDone(), e2.EpisodesDone())
	}
}

// TestSetStateRejectsBadState: every invalid field is named and the
// environment is left unchanged.
func TestSetStateRejectsBadState(t *testing.T) {
	ds := walkDataset(7, 100)
	e := newEnv(t, ds, market.Range{From: 10, To: 100}, 2, 16)
	var res sim.StepResult
	step(t, e, &res, long2, flat)
	good := e.State()
	clone := func() sim.EnvState {
		s := good
		s.Bar, s.Start, s.End = append([]int64(nil), s.Bar...), append([]int64(nil), s.Start...), append([]int64(nil), s.End...)
		s.Position, s.Exit, s.Held = append([]int64(nil), s.Position...), append([]int64(nil), s.Exit...), append([]int64(nil), s.Held...)
		s.Entry, s.Stop, s.EpReward = append([]float64(nil), s.Entry...), append([]float64(nil), s.Stop...), append([]float64(nil), s.EpReward...)
		return s
	}
	for _, c := range []struct {
		field string
		edit  func(*sim.EnvState)
	}{
		{"range", func(s *sim.EnvState) { s.To = 99 }},
		{"EpisodeBars", func(s *sim.EnvState) { s.EpisodeBars = 15 }},
		{"Bar", func(s *sim.EnvState) { s.Bar = s.Bar[:1] }},
		{"Entry[0]", func(s *sim.EnvState) { s.Entry[0] = math.NaN() }},
		{"Bar[1]", func(s *sim.EnvState) { s.Bar[1] = s.End[1] - 1 }},
		{"Start[0]", func(s *sim.EnvState) { s.Start[0], s.End[0] = 90, 106 }},
		{"Position[0]", func(s *sim.EnvState) { s.Position[0] = 5 }},
		{"Exit[0]", func(s *sim.EnvState) { s.Exit[0] = 3 }},
		{"env 1 is flat", func(s *sim.EnvState) { s.Stop[1] = 99 }},
	} {
		s := clone()
		c.edit(&s)
		err := e.SetState(s)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %v, want one naming %s", c.field, err, c.field)
		}
	}
	after := e.State()
	if after.Bar[0] != good.Bar[0] || after.Position[0] != good.Position[0] || after.Entry[0] != good.Entry[0] {
		t.Errorf("failed SetState changed the environment: %+v, was %+v", after, good)
	}
}

// TestBadInputIsAnError: construction and Step name what is wrong and do
// not move the environment.
func TestBadInputIsAnError(t *testing.T) {
	ds := walkDataset(8, 50)
	r := market.Range{From: 0, To: 50}
	rng := rand.New(rand.NewPCG(1, 1))
	nan := walkDataset(8, 50)
	nan.Bars.Low[17] = math.NaN()
	noPV := walkDataset(8, 50)
	noPV.Instrument.PointValue = 0
	short := walkDataset(8, 50)
	short.ATR = short.ATR[:49]
	for _, c := range []struct {
		want string
		err  func() error
	}{
		{"bar 17: low", func() error { _, err := sim.NewVecEnv(nan, r, 1, 8, rng); return err }},
		{"point_value", func() error { _, err := sim.NewVecEnv(noPV, r, 1, 8, rng); return err }},
		{"ATR has 49", func() error { _, err := sim.NewVecEnv(short, r, 1, 8, rng); return err }},
		{"range [49, 50)", func() error { _, err := sim.NewVecEnv(ds, market.Range{From: 49, To: 50}, 1, 8, rng); return err }},
		{"episode of 1", func() error { _, err := sim.NewVecEnv(ds, r, 1, 1, rng); return err }},
		{"0 environments", func() error { _, err := sim.NewVecEnv(ds, r, 0, 8, rng); return err }},
	} {
		if err := c.err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
	}
	e := newEnv(t, ds, r, 2, 8)
	before := []int{e.Bar(0), e.Bar(1)}
	var res sim.StepResult
	err := e.Step([]market.Action{long2, {Dir: 1, Size: 4}}, &res)
	if err == nil || !strings.Contains(err.Error(), "env 1") || !strings.Contains(err.Error(), "size 4") {
		t.Errorf("bad action: error %v, want one naming env 1 and size 4", err)
	}
	if e.Bar(0) != before[0] || e.Position(0) != 0 {
		t.Error("a rejected Step moved env 0")
	}
	if err := e.Step([]market.Action{long2}, &res); err == nil {
		t.Error("1 action for 2 envs: no error")
	}
}
