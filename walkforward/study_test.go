package walkforward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/policy"
	"github.com/dqnflow/dqnflow/walkforward/walkforwardtest"
)

// fixtureStudy is three H4 forex slices of the corpus (testdata/): EURUSD
// and GBPUSD from 2015-01-05, USDJPY a week later, weekly windows, two
// seeds, GBPUSD left out of training. The calendar (worked out in
// TestStudyEndToEnd): two windows, testing the weeks from 2015-03-18 and
// 2015-03-25; USDJPY, which starts later, has 61 training bars before
// window 0's validation block, fewer than env.episode_bars+2 = 66, and
// sits it out.
func fixtureStudy(t *testing.T) *Study {
	series, err := prices.ParseSeries("testdata/EURUSD_H4.csv,testdata/GBPUSD_H4.csv\ntestdata/USDJPY_H4.csv")
	if err != nil {
		t.Fatal(err)
	}
	week := Period{Days: 7}
	return &Study{
		Config: walkforwardtest.TinyConfig(t), Series: series,
		Layout:   Layout{Step: week, Test: week, Valid: week, MinShare: 0.25},
		Seeds:    SeedList(1, 2),
		LeaveOut: []string{"GBPUSD_H4"},
		Train:    LocalTrainer(cpu.Backend{}, checkpoint.Options{}, nil),
	}
}

// TestStudyEndToEnd runs the reduced study on the CPU: every window ×
// series that takes part has each baseline once and the agent once a
// seed, the left-out series is marked, and the baselines' figures are
// recomputed by hand from the closes.
func TestStudyEndToEnd(t *testing.T) {
	s := fixtureStudy(t)
	var log bytes.Buffer
	s.Log = &log
	start := time.Now()
	out, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("study in %v:\n%s", time.Since(start), log.String())
	if len(out.Windows) != 2 || !out.Windows[0].TestFrom.Equal(time.Date(2015, 3, 18, 0, 0, 0, 0, time.UTC)) ||
		!out.Windows[1].TestFrom.Equal(time.Date(2015, 3, 25, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("windows %+v: want tests from 2015-03-18 and 2015-03-25", out.Windows)
	}
	if len(out.Plan) != 6 || out.Plan[2].Series != "USDJPY_H4" || !strings.Contains(out.Plan[2].Skip, "holds 61 bars, fewer than the 66") {
		t.Fatalf("plan %+v: want USDJPY_H4 out of window 0 for its 61 training bars", out.Plan)
	}
	if out.Trials != (Trials{Study: 1, Total: 1}) {
		t.Errorf("trials %+v", out.Trials)
	}
	type key struct {
		w        int
		series   string
		strategy string
		seed     uint64
	}
	got := map[key]Result{}
	for _, r := range out.Results {
		k := key{r.Window, r.Series, r.Strategy, r.Seed}
		if _, dup := got[k]; dup {
			t.Errorf("two results for %+v", k)
		}
		got[k] = r
		if r.InTraining != (r.Series != "GBPUSD_H4") {
			t.Errorf("%+v: in training %v", k, r.InTraining)
		}
		if len(r.Days) != len(r.Returns) || len(r.Days) == 0 {
			t.Errorf("%+v: %d days, %d returns", k, len(r.Days), len(r.Returns))
		}
		if r.SharpeLo > r.Sharpe+1e-9 || r.SharpeHi < r.Sharpe-1e-9 {
			t.Errorf("%+v: Sharpe %g outside its interval [%g, %g]", k, r.Sharpe, r.SharpeLo, r.SharpeHi)
		}
	}
	want := 0
	for _, sw := range out.Plan {
		if sw.Skip != "" {
			continue
		}
		ds, err := market.Prepare(context.Background(), s.Source, windowConfig(s.seriesConfig(s.Series[seriesIndex(s, sw.Series)]), ds0(t, s, sw.Series), sw))
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []string{StrategyFlat, StrategyBuyAndHold, StrategyMomentum, StrategyBestRule} {
			want++
			r, ok := got[key{sw.Window, sw.Series, st, 0}]
			if !ok {
				t.Errorf("window %d, %s: no %s", sw.Window, sw.Series, st)
				continue
			}
			checkByHand(t, s, ds, sw, r)
		}
		for _, seed := range s.Seeds {
			want++
			r, ok := got[key{sw.Window, sw.Series, StrategyAgent, seed}]
			if !ok {
				t.Errorf("window %d, %s: no agent for seed %d", sw.Window, sw.Series, seed)
				continue
			}
			if r.Bars != sw.Test.Len() || (r.Series == "GBPUSD_H4" && !strings.Contains(r.Note, "trained on EURUSD_H4")) {
				t.Errorf("agent %+v: %d bars, detail %q", sw, r.Bars, r.Detail)
			}
			if (r.Detail == DetailAbstained) != (r.ValidT < 2) || (r.Detail != "" && r.Detail != DetailAbstained) {
				t.Errorf("agent %+v seed %d: validation t %.2f, detail %q: the gate is t ≥ 2", sw, seed, r.ValidT, r.Detail)
			}
			if r.Detail == DetailAbstained && (r.TotalReturn != 0 || r.Turnover != 0 || !strings.Contains(r.Note, "below backtest.min_valid_t 2")) {
				t.Errorf("agent %+v seed %d abstained but trades: %+v", sw, seed, r)
			}
		}
	}
	if len(out.Results) != want || want != 5*(4+2) {
		t.Errorf("%d results, want %d (= 5 × 6: four baselines and two seeds on each of the 5 window × series that take part)", len(out.Results), want)
	}
	for _, w := range out.Windows {
		n := 0
		for _, tm := range out.Timings {
			if tm.Window == w.Index {
				n++
			}
		}
		if n != 4 {
			t.Errorf("window %d: %d timings, want prepare, baselines, train, backtest", w.Index, n)
		}
	}
	if !strings.Contains(log.String(), "window 1 (test 2015-03-25 to 2015-04-01, 3 of 3 series): prepare") {
		t.Errorf("log has no timing line for window 1:\n%s", log.String())
	}
}

func seriesIndex(s *Study, name string) int {
	for i, sp := range s.Series {
		if sp.Name == name {
			return i
		}
	}
	return -1
}

func ds0(t *testing.T, s *Study, name string) *prices.Bars {
	b, err := market.Load(context.Background(), s.Source, s.seriesConfig(s.Series[seriesIndex(s, name)]))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkByHand recomputes a baseline's test equity from the closes and
// opens of ds without the backtester: the position decided at bar t
// (contracts, from the rule) is filled at the open of t+1, so bar j
// earns pos_{j−1}·(open_j − close_{j−1}) + pos_j·(close_j − open_j) a
// point; no costs. Then its daily returns and total return.
func checkByHand(t *testing.T, s *Study, ds *market.Dataset, sw SeriesWindow, r Result) {
	t.Helper()
	b, in := ds.Bars, ds.Instrument
	contracts := func(a market.Action) float64 {
		if a.Dir == 1 {
			return 0
		}
		n := math.Max(1, math.Round(float64(a.Size+1)/market.NumSizes*float64(in.MaxContracts)))
		if a.Dir == 0 {
			return -n
		}
		return n
	}
	var act func(t int) market.Action
	switch r.Strategy {
	case StrategyFlat:
		act = func(int) market.Action { return flatAction }
	case StrategyBuyAndHold:
		act = func(int) market.Action { return longAction }
	case StrategyMomentum:
		m, err := ChooseMomentum(ds, ds.Train)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(r.Detail, m.Lookback.String()) {
			t.Errorf("%s %+v: detail %q does not name the lookback %s", r.Strategy, sw, r.Detail, m.Lookback)
		}
		act = func(t int) market.Action { return m.Rule.Action(b.Close, t) }
	case StrategyBestRule:
		var rule sim.Rule
		for _, x := range sim.Rules(sim.DefaultLookbacks) {
			if x.Name() == r.Detail {
				rule = x
			}
		}
		if rule.Lookback == 0 {
			t.Fatalf("best rule %q is not in the family", r.Detail)
		}
		p := rule.Policy(b)
		act = func(t int) market.Action { return p.Act(t, nil) }
	}
	te := sw.Test
	// The contract is sized at the test range's first fill, as every
	// backtest sizes it (market.TradedInstrument); buy-and-hold's at
	// leverage 1 (market.BuyAndHoldInstrument).
	size := market.TradedInstrument
	if r.Strategy == StrategyBuyAndHold {
		size = market.BuyAndHoldInstrument
	}
	traded, err := size(ds, te)
	if err != nil {
		t.Fatal(err)
	}
	in.PointValue = traded.PointValue
	eq := make([]float64, te.Len())
	eq[0] = in.InitialCapital
	pos := 0.0
	for j := te.From + 1; j < te.To; j++ {
		next := contracts(act(j - 1))
		pnl := pos*(b.Open[j]-b.Close[j-1]) + next*(b.Close[j]-b.Open[j])
		pos = next
		eq[j-te.From] = eq[j-te.From-1] + pnl*in.PointValue
	}
	days, rets, err := sim.DailyReturns(b, te, eq)
	if err != nil {
		t.Fatal(err)
	}
	if len(rets) != len(r.Returns) {
		t.Fatalf("%s %+v: %d daily returns, by hand %d", r.Strategy, sw, len(r.Returns), len(rets))
	}
	for i := range rets {
		if math.Abs(rets[i]-r.Returns[i]) > 1e-9 || days[i] != r.Days[i] {
			t.Errorf("%s window %d %s day %d: return %g, by hand %g", r.Strategy, sw.Window, sw.Series, days[i], r.Returns[i], rets[i])
			break
		}
	}
	if tr := eq[len(eq)-1]/eq[0] - 1; math.Abs(tr-r.TotalReturn) > 1e-9 {
		t.Errorf("%s window %d %s: total return %g, by hand %g", r.Strategy, sw.Window, sw.Series, r.TotalReturn, tr)
	}
	if r.Costs != 0 {
		t.Errorf("%s: costs %g on a costless instrument", r.Strategy, r.Costs)
	}
}

// TestDailyReturnsJoinTheBarsOfADay: three bars on one day and two on the
// next make two daily returns, each over the last equity of the day
// before.
func TestDailyReturnsJoinTheBarsOfADay(t *testing.T) {
	t0 := time.Date(2020, 3, 2, 8, 0, 0, 0, time.UTC)
	b := &prices.Bars{Time: []time.Time{t0, t0.Add(4 * time.Hour), t0.Add(8 * time.Hour), t0.Add(24 * time.Hour), t0.Add(28 * time.Hour)}, Close: make([]float64, 5)}
	days, rets, err := sim.DailyReturns(b, market.Range{From: 0, To: 5}, []float64{100, 101, 102, 99, 104.04})
	if err != nil {
		t.Fatal(err)
	}
	d := int32(t0.Unix() / 86400)
	if len(days) != 2 || days[0] != d || days[1] != d+1 || math.Abs(rets[0]-0.02) > 1e-12 || math.Abs(rets[1]-0.02) > 1e-12 {
		t.Errorf("days %v, returns %v: want [%d %d], [0.02 0.02]", days, rets, d, d+1)
	}
}

func TestLeaveOutSplitIsSeededAndPartial(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	x, y := LeaveOutSplit(names, 0.25, 7), LeaveOutSplit(names, 0.25, 7)
	if len(x) != 2 || strings.Join(x, ",") != strings.Join(y, ",") {
		t.Errorf("split %v then %v: want the same 2 names", x, y)
	}
	if got := LeaveOutSplit(names, 1, 1); len(got) != 7 {
		t.Errorf("fraction 1 leaves out %d of 8: want all but one", len(got))
	}
	if got := LeaveOutSplit(names, 0, 1); got != nil {
		t.Errorf("fraction 0 leaves out %v", got)
	}
}

func TestStudyRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		edit func(*Study)
		want string
	}{
		{func(s *Study) { s.LeaveOut = []string{"XAUUSD"} }, `left-out series "XAUUSD"`},
		{func(s *Study) { s.LeaveOut = []string{"EURUSD_H4", "GBPUSD_H4", "USDJPY_H4"} }, "every series (3) is left out"},
		{func(s *Study) { s.Seeds = []uint64{3, 3} }, "seed 3 listed twice"},
		{func(s *Study) { s.Gate = "record" }, `gate "record"`},
	} {
		s := fixtureStudy(t)
		c.edit(s)
		if _, err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want an error naming %q", err, c.want)
		}
	}
	if _, err := prices.ParseSeries("testdata/NOPE*.csv"); err == nil || !strings.Contains(err.Error(), `no file matches "testdata/NOPE*.csv"`) {
		t.Errorf("ParseSeries of a glob matching nothing: %v", err)
	}
}

// TestStudyPanelTrainsOneRunASeed: with a panel trainer, each seed's one
// run trains on every training series (data.series and the window's
// calendar dates in its config) and is tested on every series of the
// window, the left-out one too. The trainer here learns nothing: its
// agent holds a full long position, so its results must be
// buy-and-hold's, day for day.
func TestStudyPanelTrainsOneRunASeed(t *testing.T) {
	s := fixtureStudy(t)
	s.Panel = true
	var reqs []TrainRequest
	s.Train = func(_ context.Context, req TrainRequest) (Agent, error) {
		reqs = append(reqs, req)
		return Agent{Policy: PolicyBacktester{BuyAndHold()}, Clone: func() (Backtester, error) { return PolicyBacktester{BuyAndHold()}, nil }, ValidT: 3}, nil
	}
	out, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Window 0: EURUSD alone trains (GBPUSD is left out, USDJPY sits
	// out): one series, so data.path; window 1: EURUSD and USDJPY.
	if len(reqs) != 4 || len(reqs[0].Data) != 1 || len(reqs[2].Data) != 2 || reqs[2].Series[1] != "USDJPY_H4" {
		t.Fatalf("%d requests: want 2 a window, one series then two", len(reqs))
	}
	d := reqs[2].Config.Data
	if d.Path != "" || d.Series != "testdata/EURUSD_H4.csv,testdata/USDJPY_H4.csv" || d.TrainTo != "2015-03-18T00:00:00Z" || d.TestFrom != "2015-03-25T00:00:00Z" || d.TestTo != "2015-04-01T00:00:00Z" {
		t.Errorf("panel request's data config %+v", d)
	}
	bh := map[[2]any]Result{}
	for _, r := range out.Results {
		if r.Strategy == StrategyBuyAndHold {
			bh[[2]any{r.Window, r.Series}] = r
		}
	}
	n := 0
	for _, r := range out.Results {
		if r.Strategy != StrategyAgent {
			continue
		}
		n++
		b := bh[[2]any{r.Window, r.Series}]
		if r.TotalReturn != b.TotalReturn || len(r.Returns) != len(b.Returns) || r.Sharpe != b.Sharpe || r.Detail != "" || r.Note != "" {
			t.Errorf("agent %d %s seed %d: total %g, Sharpe %g, detail %q; want buy-and-hold's %g, %g", r.Window, r.Series, r.Seed, r.TotalReturn, r.Sharpe, r.Detail, b.TotalReturn, b.Sharpe)
		}
	}
	if n != 10 {
		t.Errorf("%d agent results, want 10 (5 window × series, 2 seeds)", n)
	}
}

// TestStudyGateNoneTradesEveryCheckpoint: with --gate none no run
// abstains, whatever its validation t.
func TestStudyGateNoneTradesEveryCheckpoint(t *testing.T) {
	s := fixtureStudy(t)
	s.Gate = GateNone
	s.Train = func(_ context.Context, req TrainRequest) (Agent, error) {
		return Agent{Policy: PolicyBacktester{BuyAndHold()}, Clone: func() (Backtester, error) { return PolicyBacktester{BuyAndHold()}, nil }, ValidT: -1, Abstained: true}, nil
	}
	out, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Results {
		if r.Strategy == StrategyAgent && (r.Detail != "" || r.TotalReturn == 0) {
			t.Errorf("gate none: agent %d %s: detail %q, total return %g", r.Window, r.Series, r.Detail, r.TotalReturn)
		}
	}
	s.Gate = GateWindow
	if out, err = s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Results {
		if r.Strategy == StrategyAgent && (r.Detail != DetailAbstained || r.TotalReturn != 0) {
			t.Errorf("gate window: agent %d %s: detail %q, total return %g; want abstained and flat", r.Window, r.Series, r.Detail, r.TotalReturn)
		}
	}
}

// TestPanelStudyTrainsOneAgentOnTheTrainingSeries runs the fixture study
// as a panel: window 1's agent is one run per seed on EURUSD and USDJPY
// joined (window 0's on EURUSD alone: USDJPY sits it out), tested on
// every series' test block, GBPUSD (left out) included; the series of a
// window share one agent's validation figures; its checkpoint records the
// panel, and its validation Sharpe is the equal-risk portfolio's of its
// policy's validation backtests, recomputed from the checkpoint.
func TestPanelStudyTrainsOneAgentOnTheTrainingSeries(t *testing.T) {
	s := fixtureStudy(t)
	s.Panel = true
	s.Dir = t.TempDir()
	out, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !out.Panel || len(out.Results) != 5*(4+2) {
		t.Fatalf("panel %v, %d results: want 30 (four baselines and two seeds on each of 5 window × series)", out.Panel, len(out.Results))
	}
	type agentKey struct {
		w    int
		seed uint64
	}
	valid := map[agentKey]float64{}
	tested := map[agentKey][]string{}
	for _, r := range out.Results {
		if r.Strategy != StrategyAgent {
			continue
		}
		k := agentKey{r.Window, r.Seed}
		if v, ok := valid[k]; ok && v != r.ValidSharpe {
			t.Errorf("window %d seed %d: %s has validation Sharpe %g, another series %g: one agent a window and seed", r.Window, r.Seed, r.Series, r.ValidSharpe, v)
		}
		valid[k] = r.ValidSharpe
		tested[k] = append(tested[k], r.Series)
		if r.InTraining != (r.Series != "GBPUSD_H4") {
			t.Errorf("%s window %d: in training %v", r.Series, r.Window, r.InTraining)
		}
	}
	for _, seed := range s.Seeds {
		if got := tested[agentKey{1, seed}]; len(got) != 3 {
			t.Errorf("window 1 seed %d: agent tested on %v, want all three series", seed, got)
		}
	}

	path := s.Dir + "/window-1/panel/seed-1.safetensors"
	ck, _, err := checkpoint.Read(context.Background(), path, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ranges []market.PanelSeries
	if err := json.Unmarshal([]byte(ck.Meta[checkpoint.MetaPanel]), &ranges); err != nil {
		t.Fatalf("meta %s = %q: %v", checkpoint.MetaPanel, ck.Meta[checkpoint.MetaPanel], err)
	}
	if len(ranges) != 2 || ranges[0].Series != "EURUSD_H4" || ranges[1].Series != "USDJPY_H4" || ck.Meta[MetaSeries] != "EURUSD_H4,USDJPY_H4" {
		t.Fatalf("checkpoint panel %+v, series %q: want EURUSD_H4 and USDJPY_H4", ranges, ck.Meta[MetaSeries])
	}
	var parts []*market.Dataset
	for _, sw := range out.Plan {
		if sw.Window == 1 && sw.Series != "GBPUSD_H4" {
			ds, err := market.Prepare(context.Background(), s.Source, windowConfig(s.seriesConfig(s.Series[seriesIndex(s, sw.Series)]), ds0(t, s, sw.Series), sw))
			if err != nil {
				t.Fatal(err)
			}
			if !ranges[len(parts)].TrainFrom.Equal(ds.Bars.Time[ds.Train.From]) || ranges[len(parts)].ValidBars != ds.Valid.Len() {
				t.Errorf("checkpoint range %+v, the window's training from %v, %d validation bars", ranges[len(parts)], ds.Bars.Time[ds.Train.From], ds.Valid.Len())
			}
			parts = append(parts, ds)
		}
	}
	var inst market.Instrument
	if err := json.Unmarshal([]byte(ck.Meta[checkpoint.MetaInstrument]), &inst); err != nil || inst != parts[0].Instrument {
		t.Errorf("checkpoint instrument %+v (%v), want EURUSD's %+v", inst, err, parts[0].Instrument)
	}
	pol, err := policy.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	g := GreedyPolicy(pol.Greedy)
	sc, err := sim.PanelValidation(func(d *market.Dataset, r market.Range) (sim.Report, error) { return g.Backtest(d, r, nil) },
		[]string{"EURUSD_H4", "USDJPY_H4"}, parts)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(sc.Sharpe-valid[agentKey{1, 1}]) > 1e-9*max(1, math.Abs(sc.Sharpe)) {
		t.Errorf("window 1 seed 1: validation Sharpe %g, the checkpoint's portfolio Sharpe %g", valid[agentKey{1, 1}], sc.Sharpe)
	}
}

// TestStudyStopsAtItsDeadline: with a deadline that the first window's
// time already passes, the study runs that window, starts no other, and
// says so; the results are the first window's only.
func TestStudyStopsAtItsDeadline(t *testing.T) {
	s := fixtureStudy(t)
	s.Deadline = time.Now().Add(time.Millisecond)
	out, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Windows) != 1 || len(out.Plan) != len(s.Series) {
		t.Fatalf("%d windows, %d plan rows after the deadline; want 1 and %d", len(out.Windows), len(out.Plan), len(s.Series))
	}
	if !strings.Contains(out.Stopped, "stopped at the deadline") || !strings.Contains(out.Stopped, "after 1 of 2 windows") {
		t.Fatalf("Stopped %q: want the deadline, 1 of 2 windows", out.Stopped)
	}
	for _, r := range out.Results {
		if r.Window != 0 {
			t.Fatalf("a result of window %d after the deadline", r.Window)
		}
	}
	if len(out.Results) == 0 {
		t.Fatal("no results of the window that ran")
	}
}

// TestInterruptedStudyKeepsTheWindowsDone cancels the study while its
// second window trains: the error is ErrInterrupted and the output holds
// the first window's results.
func TestInterruptedStudyKeepsTheWindowsDone(t *testing.T) {
	s := fixtureStudy(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	train := s.Train
	s.Train = func(ctx2 context.Context, req TrainRequest) (Agent, error) {
		if req.Window.Index == 1 {
			cancel()
			return Agent{}, ctx.Err()
		}
		return train(ctx2, req)
	}
	out, err := s.Run(ctx)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("error %v: want ErrInterrupted", err)
	}
	if len(out.Windows) != 1 || !strings.Contains(out.Stopped, "interrupted after 1 of 2 windows") {
		t.Fatalf("%d windows, stopped %q: want the first window, interrupted", len(out.Windows), out.Stopped)
	}
	n := 0
	for _, r := range out.Results {
		if r.Window != 0 {
			t.Fatalf("a result of window %d", r.Window)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no results of the first window")
	}
}

// TestCausalStudyLaysWindowsAfterTheBurnIn: with data.normalize causal a
// series' ranges start after the normaliser's burn-in, as market.Prepare
// splits them, so the study runs (before, every window's dataset
// disagreed with its plan and the study failed).
func TestCausalStudyLaysWindowsAfterTheBurnIn(t *testing.T) {
	series, err := prices.ParseSeries("bundled:bitcoin_2024.csv")
	if err != nil {
		t.Fatal(err)
	}
	month := Period{Months: 1}
	s := &Study{
		Config: walkforwardtest.TinyConfig(t), Series: series,
		Layout: Layout{Step: Period{Months: 4}, Test: month, Valid: month, MinTrain: month},
		Seeds:  SeedList(1, 1),
		Train:  LocalTrainer(cpu.Backend{}, checkpoint.Options{}, nil),
	}
	s.Config.Data.Normalize = config.NormalizeCausal
	out, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sw := range out.Plan {
		if sw.Skip == "" && sw.Train.From < market.FeatureWarmup+market.CausalBurnIn {
			t.Fatalf("window %d, %s trains from bar %d, inside the causal burn-in (before %d)", sw.Window, sw.Series, sw.Train.From, market.FeatureWarmup+market.CausalBurnIn)
		}
	}
	if len(out.Results) == 0 {
		t.Fatal("no results")
	}
}

// TestDaysPerYearCountsTheBlocksDays: a year of weekdays is about 261
// days a year, of every day 365.25 (a leap-free year: 365 of 365 days),
// whatever the number of bars each day held.
func TestDaysPerYearCountsTheBlocksDays(t *testing.T) {
	var week, all []int32
	for d := int32(0); d < 365; d++ {
		all = append(all, d)
		if d%7 < 5 {
			week = append(week, d)
		}
	}
	if got := daysPerYear(all); math.Abs(got-365.25) > 1e-9 {
		t.Errorf("every day of a year: %g days a year, want 365.25", got)
	}
	if got := daysPerYear(week); math.Abs(got-261*365.25/365) > 1e-9 {
		t.Errorf("the weekdays of a year: %g days a year, want %g", got, 261*365.25/365)
	}
	if got := daysPerYear(nil); got != 0 {
		t.Errorf("no days: %g, want 0", got)
	}
}
