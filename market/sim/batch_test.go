package sim_test

import (
	"hash/fnv"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// rowPolicy is a policy that is a function of one observation row, served
// both ways: bar by bar (market.Policy) and in batches
// (market.BatchPolicy), counting the rows it decides.
type rowPolicy struct {
	f    func(obs []float32) market.Action
	rows int
}

func (p *rowPolicy) Act(_ int, obs []float32) market.Action {
	p.rows++
	return p.f(obs)
}

func (p *rowPolicy) ActBatch(obs []float32, rows int, dst []market.Action) error {
	if len(obs) != rows*market.ObsDim || len(dst) != rows {
		return nil
	}
	for i := range rows {
		dst[i] = p.Act(0, obs[i*market.ObsDim:(i+1)*market.ObsDim])
	}
	return nil
}

// trader enters on the bar's features and leaves on its own agent features
// (unrealised P&L, bars held), the way a trained network's policy reads
// both.
func trader(obs []float32) market.Action {
	f, ag := obs[:market.NumFeatures], obs[market.NumFeatures:]
	if ag[1] == 0 { // flat
		switch {
		case f[3] > 0.8:
			return market.Action{Dir: 2, Size: int(f[5]*4) % 4, Exit: int(f[7]*3) % 3}
		case f[3] < 0.15:
			return market.Action{Dir: 0, Size: int(f[6]*4) % 4, Exit: int(f[8]*3) % 3}
		}
		return market.Action{Dir: 1}
	}
	dir := 2
	if ag[3] == 1 {
		dir = 0
	}
	if ag[4] < -1.5 || ag[5] > 0.05+0.1*f[2] {
		return market.Action{Dir: 1}
	}
	if ag[4] > 1 && f[9] > 0.5 { // add to a winner
		return market.Action{Dir: dir, Size: 3, Exit: int(ag[7] * 2)}
	}
	return market.Action{Dir: dir, Size: int(ag[1]*4+0.5) - 1, Exit: int(ag[7] * 2)}
}

// flipper reverses its position at every bar: every decision leads to a
// state no chain foresaw, so BacktestBatch runs out of rounds and finishes
// in its one-pass mode.
func flipper(obs []float32) market.Action {
	ag := obs[market.NumFeatures:]
	if ag[2] == 1 { // long
		return market.Action{Dir: 0, Size: 1}
	}
	return market.Action{Dir: 2, Size: 2, Exit: 1}
}

// sizer is always long and changes its size at random with every
// observation: each bar's account is one no chain foresaw, and the
// position never closes, so BacktestBatch runs out of rounds and finishes
// in its one-pass mode.
func sizer(obs []float32) market.Action {
	a := hashed(obs)
	return market.Action{Dir: 2, Size: a.Size}
}

// hashed is a policy whose action changes with any bit of the observation,
// the worst case for BacktestBatch's guessing.
func hashed(obs []float32) market.Action {
	h := fnv.New64a()
	var b [4]byte
	for _, x := range obs {
		u := math.Float32bits(x)
		b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		h.Write(b[:])
	}
	v := h.Sum64()
	return market.Action{Dir: int(v % 3), Size: int(v/3) % 4, Exit: int(v/12) % 3}
}

// TestBacktestBatchIsBacktest: on random walks, with a policy that trades
// on its own agent features, one that defeats every guess and one that is
// ruined at a margin floor, BacktestBatch books exactly Backtest's report,
// and deciding in batches asks for far fewer calls than bars.
func TestBacktestBatchIsBacktest(t *testing.T) {
	for _, c := range []struct {
		name      string
		f         func([]float32) market.Action
		floor     float64
		maxRounds int // 0: not checked
	}{
		{"trader", trader, 0, 40},
		{"hashed", hashed, 0, 0},
		{"flipper", flipper, 0, 0},
		{"sizer", sizer, 0, 0},
		{"ruined", trader, 0.995, 40},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			ds := walkDataset(seed, 4000)
			ds.Instrument.MarginFloor = c.floor
			r := market.Range{From: 50, To: 4000}
			ref := &rowPolicy{f: c.f}
			want, err := sim.Backtest(ds, r, ref)
			if err != nil {
				t.Fatal(err)
			}
			bp := &rowPolicy{f: c.f}
			got, st, err := sim.BacktestBatch(ds, r, bp, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s seed %d: BacktestBatch differs from Backtest: %d trades, Sharpe %v vs %d trades, Sharpe %v",
					c.name, seed, got.Trades, got.Sharpe, want.Trades, want.Sharpe)
			}
			if st.Evaluated != bp.rows || st.Decisions != ref.rows || len(st.Actions) != ref.rows {
				t.Errorf("%s seed %d: stats %+v, policy decided %d rows of %d bars", c.name, seed, st, bp.rows, r.Len()-1)
			}
			t.Logf("%s seed %d: %d trades, %d decisions (bar by bar: %d), %d rounds, %d rows decided",
				c.name, seed, want.Trades, st.Decisions, ref.rows, st.Rounds, st.Evaluated)
			if st.Rounds > st.Decisions+25 {
				t.Errorf("%s seed %d: %d calls for %d decisions: more than a bar-by-bar backtest and the rounds", c.name, seed, st.Rounds, st.Decisions)
			}
			if c.maxRounds > 0 && st.Rounds > c.maxRounds {
				t.Errorf("%s seed %d: %d rounds for %d trades, want at most %d", c.name, seed, st.Rounds, want.Trades, c.maxRounds)
			}
			if c.name == "ruined" && want.RuinBar == 0 {
				t.Errorf("%s seed %d: never ruined; the case tests nothing", c.name, seed)
			}
		}
	}
}

// TestBacktestBatchErrorsNameTheProblem: a nil policy, a failing policy
// and an invalid action are errors naming what failed.
func TestBacktestBatchErrorsNameTheProblem(t *testing.T) {
	ds := walkDataset(4, 500)
	r := market.Range{From: 50, To: 500}
	if _, _, err := sim.BacktestBatch(ds, r, nil, nil); err == nil || !strings.Contains(err.Error(), "nil policy") {
		t.Errorf("nil policy: %v", err)
	}
	if _, _, err := sim.BacktestBatch(ds, r, failing{}, nil); err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "449 bars") {
		t.Errorf("failing policy: %v, want its error and the bars it was asked for", err)
	}
	bad := &rowPolicy{f: func([]float32) market.Action { return market.Action{Dir: 3} }}
	if _, _, err := sim.BacktestBatch(ds, r, bad, nil); err == nil || !strings.Contains(err.Error(), "bar 50") {
		t.Errorf("invalid action: %v, want an error naming bar 50", err)
	}
}

type failing struct{}

func (failing) ActBatch([]float32, int, []market.Action) error { return errBoom }

var errBoom = errorString("boom")

type errorString string

func (e errorString) Error() string { return string(e) }

// BenchmarkBacktestBatch measures BacktestBatch's own work (the walks,
// the chains, gathering observations) beside Backtest's, with a policy
// that costs next to nothing: 8,000 bars, the trader policy.
func BenchmarkBacktestBatch(b *testing.B) {
	ds := walkDataset(1, 8050)
	r := market.Range{From: 50, To: 8050}
	bench, err := sim.NewBenchmarks(ds, r)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("batch", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := sim.BacktestBatch(ds, r, &rowPolicy{f: trader}, bench); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bar-by-bar", func(b *testing.B) {
		for b.Loop() {
			if _, err := sim.BacktestWith(ds, r, &rowPolicy{f: trader}, bench); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestBacktestBatchIsTheSameHoweverItIsSplit: a round's rows and
// observations are prepared on several goroutines when there are enough of
// them; split as finely as possible (every round, four goroutines), the
// backtest calls the policy with the same rows in the same rounds, and
// books the same report and actions, as on one goroutine.
func TestBacktestBatchIsTheSameHoweverItIsSplit(t *testing.T) {
	type result struct {
		rep sim.Report
		st  sim.BatchStats
	}
	run := func(ds *market.Dataset, r market.Range, f func([]float32) market.Action, rows int) result {
		old := sim.SetParallelRows(rows)
		defer sim.SetParallelRows(old)
		rep, st, err := sim.BacktestBatch(ds, r, &rowPolicy{f: f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		st.Actions = slices.Clone(st.Actions) // the scratch is reused by the next call
		return result{rep, st}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, c := range []struct {
		name string
		f    func([]float32) market.Action
	}{{"trader", trader}, {"hashed", hashed}, {"sizer", sizer}} {
		for seed := uint64(1); seed <= 2; seed++ {
			ds := walkDataset(seed, 4000)
			r := market.Range{From: 50, To: 4000}
			one, split := run(ds, r, c.f, 1<<30), run(ds, r, c.f, 2)
			if !reflect.DeepEqual(one, split) {
				t.Errorf("%s seed %d: split %d rounds, %d rows, %d trades; one goroutine %d rounds, %d rows, %d trades",
					c.name, seed, split.st.Rounds, split.st.Evaluated, split.rep.Trades, one.st.Rounds, one.st.Evaluated, one.rep.Trades)
			}
		}
	}
}
