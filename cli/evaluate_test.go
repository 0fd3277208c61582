package cli

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// TestWalkWindowsTileTheEndOfTheData: the test ranges are consecutive and
// end at the last bar, each window validates on the bars just before its
// test range and trains before that, never overlapping them.
func TestWalkWindowsTileTheEndOfTheData(t *testing.T) {
	for _, train := range []int{0, 3000} {
		ws, err := walkWindows(20000, 199, 4, 1500, 1000, train, 514)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 4 || ws[3].Test.To != 20000 {
			t.Fatalf("windows %+v: want 4 ending at bar 20000", ws)
		}
		for i, w := range ws {
			if w.Test.Len() != 1500 || w.Valid.Len() != 1000 || w.Valid.To != w.Test.From || w.Train.To != w.Valid.From || w.Train.From < 199 {
				t.Errorf("train %d: window %d = %+v", train, i, w)
			}
			if i > 0 && ws[i-1].Test.To != w.Test.From {
				t.Errorf("test ranges %v and %v are not consecutive", ws[i-1].Test, w.Test)
			}
			if train > 0 && w.Train.Len() != train {
				t.Errorf("window %d trains on %d bars, want %d", i, w.Train.Len(), train)
			}
			if train == 0 && w.Train.From != 199 {
				t.Errorf("expanding window %d starts at %d, want the warmup 199", i, w.Train.From)
			}
		}
	}
	if _, err := walkWindows(3000, 199, 4, 600, 600, 0, 514); err == nil || !strings.Contains(err.Error(), "window 1 of 4") {
		t.Errorf("too many windows for the data: err = %v, want one naming the window", err)
	}
}

// TestEvaluateWritesTheTestReportWithPlots: evaluate trains on a series and
// writes report.md (the metrics table with buy-and-hold, flat and costs)
// and equity and drawdown PNGs of the test range.
func TestEvaluateWritesTheTestReportWithPlots(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir)
	out := filepath.Join(dir, "eval")
	stdout, _ := runOK(t, "evaluate", "--config", cfg, "--data", "bundled:bitcoin_2024.csv", "--out", out, "--json")
	var ev evaluation
	if err := json.Unmarshal([]byte(stdout), &ev); err != nil {
		t.Fatalf("evaluate --json: %v", err)
	}
	if len(ev.Series) != 1 || ev.Series[0].BestEpoch < 1 {
		t.Fatalf("series %+v", ev.Series)
	}
	s := ev.Series[0]
	if n := 6115 - market.FeatureWarmup; s.Test.Bars != int(0.15*float64(n)) {
		t.Errorf("report covers %d bars, want the test range of %d", s.Test.Bars, int(0.15*float64(n)))
	}
	if s.Test.Instrument.Name != "BTC" || s.Test.CostPerRoundTripBps <= 0 {
		t.Errorf("instrument %+v, round trip %g bps: want the file's BTC preset", s.Test.Instrument, s.Test.CostPerRoundTripBps)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Rule.Name == "" || s.Rule.Test.Bars != s.Test.Bars || s.Rule.Test.From != s.Test.From {
		t.Errorf("the rules' yardstick: %q over %d bars from %v; want a rule on the test range", s.Rule.Name, s.Rule.Test.Bars, s.Rule.Test.From)
	}
	for _, want := range []string{"| Sharpe |", "| cost per trade |", "buy & hold", "bps per round trip", s.Equity, s.Drawdown, "Yardstick: " + "of the simple rules", s.Rule.Name} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, f := range []string{s.Equity, s.Drawdown} {
		fh, err := os.Open(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil || img.Bounds().Dx() < 400 {
			t.Errorf("%s: %v, %v: want a PNG plot", f, err, img)
		}
	}
}

// TestEvaluateSeedsReportsEveryRun: with --seeds 3, evaluate trains the
// series at the config's seed and the two after it, reports each run's
// validation evidence and test Sharpes beside the first, and sums them up;
// the first seed's run is the one the main table shows. The three chosen
// checkpoints also vote together (policy.Ensemble), on validation for the
// evidence and on the test range, flat there when the evidence is short. --seeds with a
// checkpoint, or out of range, is refused.
func TestEvaluateSeedsReportsEveryRun(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir)
	out := filepath.Join(dir, "eval")
	stdout, _ := runOK(t, "evaluate", "--config", cfg, "--data", "bundled:bitcoin_2024.csv", "--epochs", "1", "--seeds", "3", "--out", out, "--json")
	var ev evaluation
	if err := json.Unmarshal([]byte(stdout), &ev); err != nil {
		t.Fatalf("evaluate --json: %v", err)
	}
	if len(ev.Series) != 1 {
		t.Fatalf("series %+v", ev.Series)
	}
	s := ev.Series[0]
	if len(s.Seeds) != 3 || s.Summary == nil || s.Summary.Runs != 3 {
		t.Fatalf("seeds %+v, summary %+v: want three runs", s.Seeds, s.Summary)
	}
	for i, r := range s.Seeds {
		if r.Seed != ev.Config.Seed+uint64(i) || r.BestEpoch != 1 || r.Checkpoint.Bars != s.Test.Bars {
			t.Errorf("seed row %d: %+v, want seed %d over the %d test bars", i, r, ev.Config.Seed+uint64(i), s.Test.Bars)
		}
		if r.Abstained && (r.Test.Sharpe != 0 || r.Test.Trades != 0) {
			t.Errorf("seed %d abstained but its run reports %+v, want flat", r.Seed, r.Test.Metrics)
		}
	}
	if s.Seeds[0].Test.Sharpe != s.Test.Sharpe || s.Seeds[0].Test.FinalEquity != s.Test.FinalEquity {
		t.Errorf("the first seed's run %+v is not the one reported above it (%+v)", s.Seeds[0].Test.Metrics, s.Test.Metrics)
	}
	if s.Seeds[1].Checkpoint.FinalEquity == s.Seeds[0].Checkpoint.FinalEquity && s.Seeds[2].Checkpoint.FinalEquity == s.Seeds[0].Checkpoint.FinalEquity {
		t.Errorf("three seeds gave the same checkpoint result: the seed did not reach the runs")
	}
	en := s.Ensemble
	if en == nil || en.Members != 3 || en.Own.Bars != s.Test.Bars || en.Valid.Bars < 2 || en.ValidT != en.Valid.SharpeT() {
		t.Fatalf("ensemble %+v: want the three checkpoints on the validation and test ranges", en)
	}
	if en.Abstained != (en.ValidT < ev.Config.Backtest.MinValidT) || (en.Abstained && (en.Test.Trades != 0 || en.Test.Sharpe != 0)) || (!en.Abstained && en.Test.Metrics != en.Own.Metrics) {
		t.Errorf("ensemble t = %.2f against min_valid_t %g: abstained %v with test %+v; want flat exactly when t is short", en.ValidT, ev.Config.Backtest.MinValidT, en.Abstained, en.Test.Metrics)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### The same config at 3 seeds", "| seed | best / ran |", "runs abstained", "checkpoints voting together"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, args := range [][]string{{"--seeds", "0"}, {"--seeds", "2", "--checkpoint", filepath.Join(dir, "none.safetensors")}} {
		if _, errOut, code := run(t, append([]string{"evaluate", "--data", "bundled:bitcoin_2024.csv"}, args...)...); code == 0 || !strings.Contains(errOut, "--seeds") {
			t.Errorf("evaluate %v: exit %d, %q; want a usage error naming --seeds", args, code, errOut)
		}
	}
}

// TestBacktestDefaultsToTheTestRangeAndTheFilesInstrument: on the run's own
// data, backtest runs the held-out test range; on another file it prices
// trades with that file's instrument (never the checkpoint's tick size),
// and cost flags override it.
func TestBacktestDefaultsToTheTestRangeAndTheFilesInstrument(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir)
	runOK(t, "train", "--device", "cpu", "--config", cfg, "--data", "bundled:bitcoin_2024.csv", "--epochs", "1", "--out", dir, "--json")
	ck := filepath.Join(dir, "epoch-000001.safetensors")
	backtest := func(args ...string) sim.Report {
		t.Helper()
		out, _ := runOK(t, append([]string{"backtest", "--checkpoint", ck, "--json"}, args...)...)
		var r sim.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	own := backtest("--data", "bundled:bitcoin_2024.csv")
	if n := 6115 - market.FeatureWarmup; own.Bars != int(0.15*float64(n)) || own.Instrument.Name != "BTC" {
		t.Errorf("own data: %d bars with %s, want the test range of %d bars with BTC", own.Bars, own.Instrument.Name, int(0.15*float64(n)))
	}
	valid := backtest("--data", "bundled:bitcoin_2024.csv", "--range", "validation")
	if valid.From.Equal(own.From) || !valid.To.Before(own.From) {
		t.Errorf("validation %v..%v is not before the test range %v", valid.From, valid.To, own.From)
	}
	spx := backtest("--data", "bundled:USA500IDXUSD_H1.csv")
	if spx.Instrument.Name != "ES" || spx.Instrument.TickSize != 0.25 {
		t.Errorf("another file: instrument %+v, want the S&P file's ES, not the checkpoint's BTC", spx.Instrument)
	}
	bps := backtest("--data", "bundled:USA500IDXUSD_H1.csv", "--slippage-bps", "2", "--commission-bps", "1")
	if bps.Instrument.Name != "bps" || bps.CostPerRoundTripBps < 5.999 || bps.CostPerRoundTripBps > 6.001 {
		t.Errorf("cost flags: instrument %+v, round trip %g bps; want bps and 6", bps.Instrument, bps.CostPerRoundTripBps)
	}
	if _, errOut, code := run(t, "backtest", "--checkpoint", ck, "--data", "bundled:bitcoin_2024.csv", "--instrument", "SPX"); code == 0 || !strings.Contains(errOut, "env.instrument") {
		t.Errorf("bad --instrument: exit %d, %q; want an error naming env.instrument", code, errOut)
	}
}

// TestGatesWeighTheEvidenceThatPrecedesEachTestRange: a walk-forward
// window trades with the window gate on its own validation t, with the
// pooled gate on the validation ranges of it and every earlier window
// joined (so a window whose own range is too short can trade on its
// predecessors' as well), and with the record gate on the earlier windows'
// test ranges joined (never the first window); with none, always.
func TestGatesWeighTheEvidenceThatPrecedesEachTestRange(t *testing.T) {
	const bpy = 6000
	// A report of n bars whose returns alternate drift±1e-3, so its t
	// grows as √bars.
	rep := func(n int, drift float64) sim.Report {
		eq, pos := []float64{1e5}, []int{0}
		for i := 1; i < n; i++ {
			r := drift + 1e-3
			if i%2 == 0 {
				r = drift - 1e-3
			}
			eq, pos = append(eq, eq[i-1]*(1+r)), append(pos, 1)
		}
		return sim.Report{Metrics: sim.Measure(eq, pos, nil, 0, bpy), BarsPerYear: bpy, Equity: eq, BuyAndHoldEquity: eq, Positions: pos}
	}
	up, down, strong := rep(600, 6.5e-5), rep(600, -6.5e-5), rep(600, 2e-4)
	if t1 := up.SharpeT(); !(t1 > 1 && t1 < 2) {
		t.Fatalf("one window's t = %.2f; the case needs it between 1 and 2", t1)
	}
	valids := []sim.Report{up, up, down, strong}
	ckTests := []sim.Report{strong, strong, down, up}
	flat := rep(600, 0)
	flats := []sim.Report{flat, flat, flat, flat}
	ws := make([]wfResult, len(valids))
	for i := range ws {
		ws[i] = wfResult{Window: i + 1, CheckpointTest: ckTests[i]}
	}
	if err := weighEvidence(ws, valids, ckTests); err != nil {
		t.Fatal(err)
	}
	if ws[0].PooledValidT != ws[0].ValidT || ws[0].RecordT != 0 {
		t.Errorf("window 1 pools only itself and has no record: pooled t %g, own %g, record %g", ws[0].PooledValidT, ws[0].ValidT, ws[0].RecordT)
	}
	cfg := config.BacktestConfig{MinValidT: 2}
	for gate, want := range map[string][]bool{
		gateWindow: {false, false, false, true},
		gatePooled: {false, true, false, true},
		gateRecord: {false, true, true, true},
		gateNone:   {true, true, true, true},
	} {
		g, err := applyGate(cfg, gate, ws, flats)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.Traded, want) {
			t.Errorf("gate %s traded %v, want %v (own t %.2f %.2f %.2f %.2f; pooled %.2f %.2f %.2f %.2f; record - %.2f %.2f %.2f)", gate, g.Traded, want,
				ws[0].ValidT, ws[1].ValidT, ws[2].ValidT, ws[3].ValidT, ws[0].PooledValidT, ws[1].PooledValidT, ws[2].PooledValidT, ws[3].PooledValidT,
				ws[1].RecordT, ws[2].RecordT, ws[3].RecordT)
		}
		if wantBars := 1 + len(ws)*599; g.Pooled.Bars != wantBars {
			t.Errorf("gate %s: the joined test ranges have %d bars, want %d", gate, g.Pooled.Bars, wantBars)
		}
	}
}
