package sim_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// panelParts are two series of different price levels, contracts and
// costs: A a future of point value 5 with a fixed commission and the
// constant slippage of its instrument; B a series at a twentieth of A's
// price, point value 50, commission in money and in basis points, and
// per-bar slippage.
func panelParts() (a, b *market.Dataset) {
	a = walkDataset(1, 260)
	a.Train = market.Range{From: 10, To: 210}
	b = walkDataset(2, 400)
	for t := range b.Bars.Len() {
		b.Bars.Open[t] *= 0.05
		b.Bars.High[t] *= 0.05
		b.Bars.Low[t] *= 0.05
		b.Bars.Close[t] *= 0.05
		b.ATR[t] *= 0.05
		b.Features[t*market.NumFeatures] = float32(t) // a row marker
	}
	b.Instrument = market.Instrument{TickSize: 0.01, SlippageTicks: 1, Commission: 1.5, CommissionBps: 0.5,
		PointValue: 50, MaxContracts: 4, InitialCapital: 100000}
	b.Slip = make([]float64, b.Bars.Len())
	for t := range b.Slip {
		b.Slip[t] = 0.01 * float64(1+t%3)
	}
	b.Train = market.Range{From: 20, To: 320}
	return a, b
}

// TestJoinPanelScalesPricesAndCosts: part k's prices and ATR are scaled by
// PV_k/PV_0, its per-fill cost (slippage plus commission in points, at the
// bar's open) becomes the joined Slip scaled alike, its normalised feature
// rows are copied, and the segments tile the joined training range.
func TestJoinPanelScalesPricesAndCosts(t *testing.T) {
	a, b := panelParts()
	j, err := market.JoinPanel([]string{"A", "B"}, []*market.Dataset{a, b}, "", 40)
	if err != nil {
		t.Fatal(err)
	}
	if j.Bars.Len() != 500 || j.Train != (market.Range{From: 0, To: 500}) || j.Valid.Len() != 0 || j.Test.Len() != 0 {
		t.Fatalf("joined %d bars, train %s valid %s test %s; want 500, [0, 500), empty, empty", j.Bars.Len(), j.Train, j.Valid, j.Test)
	}
	want := []market.Segment{{Name: "A", From: 0, To: 200, Weight: 1}, {Name: "B", From: 200, To: 500, Weight: 1}}
	for k, s := range j.Segments {
		if s != want[k] {
			t.Errorf("segment %d = %+v, want %+v", k, s, want[k])
		}
	}
	if in := j.Instrument; in.PointValue != 5 || in.Commission != 0 || in.CommissionBps != 0 || in.SlippageTicks != 0 || in.TickSize != 0.1 {
		t.Errorf("joined instrument %+v: want point value 5, no commission or constant slippage, tick min(0.25, 0.01·10) = 0.1", in)
	}
	// Bar 10 of A is joined bar 0 (scale 1): cost 1 tick of 0.25 + 0.62/5.
	if got, w := j.Slip[0], 0.25+0.62/5; math.Abs(got-w) > 1e-12 || j.Bars.Open[0] != a.Bars.Open[10] {
		t.Errorf("joined bar 0: slip %g open %g, want %g and A's %g", got, j.Bars.Open[0], w, a.Bars.Open[10])
	}
	for i := range 300 {
		tj, tb := 200+i, 20+i
		o := b.Bars.Open[tb]
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"open", j.Bars.Open[tj], o * 10}, {"high", j.Bars.High[tj], b.Bars.High[tb] * 10},
			{"low", j.Bars.Low[tj], b.Bars.Low[tb] * 10}, {"close", j.Bars.Close[tj], b.Bars.Close[tb] * 10},
			{"ATR", j.ATR[tj], math.Max(b.ATR[tb], 0.01) * 10},
			// slip 0.01·(1+t%3) points, commission (1.5 + 0.5 bp·open·50)/50 points, ×10
			{"slip", j.Slip[tj], (0.01*float64(1+tb%3) + (1.5+0.5e-4*o*50)/50) * 10},
		} {
			if math.Abs(c.got-c.want) > 1e-9*math.Abs(c.want) {
				t.Fatalf("joined bar %d (B's %d): %s %g, want %g", tj, tb, c.name, c.got, c.want)
			}
		}
		for f := range market.NumFeatures {
			if j.Features[tj*market.NumFeatures+f] != b.Features[tb*market.NumFeatures+f] {
				t.Fatalf("joined bar %d feature %d = %v, B's bar %d has %v", tj, f, j.Features[tj*market.NumFeatures+f], tb, b.Features[tb*market.NumFeatures+f])
			}
		}
	}
}

// TestPanelStepsEarnEachSeriesOwnMoney: the same actions (no stops) over
// the same window of a series, played in the series' own environment and
// in the joined panel's (the last decision flat, so nothing is closed at
// a bar's close), give the same P&L in money at every step and the
// same rewards: the scaling and the folded costs keep each series' own
// contract and costs.
func TestPanelStepsEarnEachSeriesOwnMoney(t *testing.T) {
	a, b := panelParts()
	j, err := market.JoinPanel([]string{"A", "B"}, []*market.Dataset{a, b}, "", 40)
	if err != nil {
		t.Fatal(err)
	}
	for k, c := range []struct {
		ds         *market.Dataset
		start, off int
	}{{a, a.Train.From + 7, 7}, {b, b.Train.From + 100, 300}} {
		own := newEnv(t, c.ds, c.ds.Train, 1, 40)
		pan := newEnv(t, j, j.Train, 1, 40)
		for _, x := range []struct {
			e     *sim.VecEnv
			start int
		}{{own, c.start}, {pan, c.off}} {
			s := x.e.State()
			s.Start[0], s.End[0], s.Bar[0] = int64(x.start), int64(x.start+40), int64(x.start)
			if err := x.e.SetState(s); err != nil {
				t.Fatal(err)
			}
		}
		var ro, rp sim.StepResult
		for s := range 39 {
			h := uint64(s*7919 + k*31)
			act := market.Action{Dir: int(h % 3), Size: int(h / 3 % 4)}
			if s == 38 {
				act = flat // B's basis-point commission is priced at the open: end flat, not at the close
			}
			step(t, own, &ro, act)
			step(t, pan, &rp, act)
			if math.Abs(ro.PnL[0]-rp.PnL[0]) > 1e-9*max(1, math.Abs(ro.PnL[0])) || ro.Done[0] != rp.Done[0] {
				t.Fatalf("series %d step %d: P&L %g done %v in its own env, %g %v in the panel", k, s, ro.PnL[0], ro.Done[0], rp.PnL[0], rp.Done[0])
			}
			if math.Abs(float64(ro.Reward[0]-rp.Reward[0])) > 1e-6*max(1, math.Abs(float64(ro.Reward[0]))) {
				t.Fatalf("series %d step %d: reward %g in its own env, %g in the panel", k, s, ro.Reward[0], rp.Reward[0])
			}
		}
		if !ro.Done[0] {
			t.Fatalf("series %d: the window did not end after 39 steps", k)
		}
	}
}

// TestJoinPanelRefusesASeriesShorterThanAnEpisode names the series.
func TestJoinPanelRefusesASeriesShorterThanAnEpisode(t *testing.T) {
	a, b := panelParts()
	b.Train = market.Range{From: 20, To: 50}
	_, err := market.JoinPanel([]string{"A", "B"}, []*market.Dataset{a, b}, "equal", 40)
	if err == nil || !strings.Contains(err.Error(), "series B") {
		t.Fatalf("err %v, want one naming series B", err)
	}
	if _, err := market.JoinPanel(nil, []*market.Dataset{a, a}, "daily", 40); err == nil || !strings.Contains(err.Error(), "daily") {
		t.Fatalf("weighting daily: err %v", err)
	}
}

// TestWindowStartWithOneSegmentIsTodaysDraw: with no segment or one, the
// draws are r.From + IntN(free+1) from the same stream, bit for bit, so
// single-series runs are unchanged.
func TestWindowStartWithOneSegmentIsTodaysDraw(t *testing.T) {
	r := market.Range{From: 17, To: 1017}
	for _, segs := range [][]market.Segment{nil, {{Name: "only", From: 17, To: 1017, Weight: 3}}} {
		got, want := rand.New(rand.NewPCG(5, 6)), rand.New(rand.NewPCG(5, 6))
		for i := range 10000 {
			g := sim.WindowStart(got, segs, r, 128)
			w := r.From + want.IntN(r.Len()-128+1)
			if g != w {
				t.Fatalf("%d segments, draw %d: %d, want %d", len(segs), i, g, w)
			}
		}
	}
}

// TestWindowStartStaysInsideASegment: 3 segments of 100, 300 and 600
// bars, windows of 50: no window crosses a boundary, and the share of
// windows in each segment is 1/3 each under "equal" weights and
// 0.1/0.3/0.6 under "bars" (within 0.01 over 60000 draws, about 5
// standard errors).
func TestWindowStartStaysInsideASegment(t *testing.T) {
	r := market.Range{From: 0, To: 1000}
	bounds := [][2]int{{0, 100}, {100, 400}, {400, 1000}}
	for _, c := range []struct {
		name  string
		w     func(n int) float64
		share []float64
	}{
		{"equal", func(int) float64 { return 1 }, []float64{1. / 3, 1. / 3, 1. / 3}},
		{"bars", func(n int) float64 { return float64(n) }, []float64{0.1, 0.3, 0.6}},
	} {
		var segs []market.Segment
		for k, bd := range bounds {
			segs = append(segs, market.Segment{Name: string(rune('a' + k)), From: bd[0], To: bd[1], Weight: c.w(bd[1] - bd[0])})
		}
		rng := rand.New(rand.NewPCG(11, 12))
		const draws = 60000
		count := make([]int, len(segs))
		seen := make([]map[int]bool, len(segs))
		for k := range seen {
			seen[k] = map[int]bool{}
		}
		for range draws {
			s := sim.WindowStart(rng, segs, r, 50)
			k := market.SegmentOf(segs, s)
			if k < 0 || market.SegmentOf(segs, s+49) != k {
				t.Fatalf("%s: window [%d, %d) crosses a segment boundary", c.name, s, s+50)
			}
			count[k]++
			seen[k][s] = true
		}
		for k, n := range count {
			if got := float64(n) / draws; math.Abs(got-c.share[k]) > 0.01 {
				t.Errorf("%s: segment %d drawn %.4f of the time, want %.4f", c.name, k, got, c.share[k])
			}
			// Every start of the segment occurs: first From, last To−50.
			if free := segs[k].Len() - 50 + 1; len(seen[k]) != free {
				t.Errorf("%s: segment %d: %d distinct starts, want all %d", c.name, k, len(seen[k]), free)
			}
		}
	}
}

// TestPanelEnvironmentWindowsStayInOneSeries: the environments of a
// joined panel play many episodes and every window lies in one series; a
// state whose window crosses series is refused.
func TestPanelEnvironmentWindowsStayInOneSeries(t *testing.T) {
	a, b := panelParts()
	j, err := market.JoinPanel([]string{"A", "B"}, []*market.Dataset{a, b}, "bars", 40)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, j, j.Train, 16, 40)
	var res sim.StepResult
	acts := make([]market.Action, 16)
	perSeries := make([]int, 2)
	for s := range 400 {
		for i := range acts {
			acts[i] = market.Action{Dir: (s + i) % 3, Size: i % 4, Exit: s % 3}
		}
		step(t, e, &res, acts...)
		st := e.State()
		for i := range 16 {
			k := market.SegmentOf(j.Segments, int(st.Start[i]))
			if k < 0 || market.SegmentOf(j.Segments, int(st.End[i]-1)) != k {
				t.Fatalf("step %d env %d: window [%d, %d) crosses series", s, i, st.Start[i], st.End[i])
			}
			if st.Bar[i] == st.Start[i] {
				perSeries[k]++
			}
		}
	}
	if perSeries[0] == 0 || perSeries[1] == 0 {
		t.Fatalf("windows started per series %v: want both series played", perSeries)
	}
	st := e.State()
	st.Start[0], st.End[0], st.Bar[0] = 180, 220, 180
	st.Position[0], st.Exit[0], st.Held[0], st.Entry[0], st.Stop[0] = 0, 0, 0, 0, 0
	if err := e.SetState(st); err == nil || !strings.Contains(err.Error(), "crosses") {
		t.Fatalf("a window across series A and B: err %v, want a refusal", err)
	}
}
