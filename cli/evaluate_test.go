package cli

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/research/evaluation"
)

// TestEvaluateWritesTheTestReportWithPlots: evaluate trains on a series and
// writes report.md (the metrics table with buy-and-hold, flat and costs)
// and equity and drawdown PNGs of the test range.
func TestEvaluateWritesTheTestReportWithPlots(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir)
	out := filepath.Join(dir, "eval")
	stdout, _ := runOK(t, "evaluate", "--config", cfg, "--data", "bundled:bitcoin_2024.csv", "--out", out, "--json")
	var ev evaluation.Evaluation
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
	var ev evaluation.Evaluation
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
