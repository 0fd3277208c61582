package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/research/evaluation"
)

// TestTrainEvaluateBacktestReportIdenticalFigures: the same checkpoint on
// the same bars with the same costs reads the same in every command
// (ADR 0036). A tiny run trains on a bundled series; its report's test
// figures for the chosen checkpoint, `evaluate --checkpoint` on that
// series and `backtest --checkpoint` of its test range (with and without
// cost flags that name the same costs: before the one sizing rule, the
// flags re-sized the contract at the file's first bar) agree bit for bit
// in Sharpe, total return, drawdown and trades, priced with one
// instrument; evaluate's rule yardstick trades that same instrument. It
// runs under env.sizing notional and vol_target.
func TestTrainEvaluateBacktestReportIdenticalFigures(t *testing.T) {
	for _, sizing := range []string{"notional", "vol_target"} {
		t.Run(sizing, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := writeTinyConfig(t, filepath.Join(dir, "tiny.json"), map[string]any{
				"env": map[string]any{"num_envs": 4, "episode_bars": 64, "collect_steps": 16, "sizing": sizing, "target_vol": 0.2},
				// The chosen checkpoint's own test backtest is reported
				// whatever its validation t (CheckpointTest).
				"backtest": map[string]any{"min_valid_t": 0},
			})
			const data = "bundled:USA500IDXUSD_H1.csv"
			out, _ := runOK(t, "train", "--device", "cpu", "--config", cfgPath, "--data", data, "--out", dir, "--json")
			var tr localrun.Result
			if err := json.Unmarshal([]byte(out), &tr); err != nil {
				t.Fatal(err)
			}
			if tr.CheckpointTest == nil {
				t.Fatalf("train reported no test range")
			}
			ck := tr.Checkpoint
			if !filepath.IsAbs(ck) {
				ck = filepath.Join(dir, filepath.Base(ck))
			}
			out, _ = runOK(t, "evaluate", "--checkpoint", ck, "--data", data, "--out", filepath.Join(dir, "eval"), "--json")
			var ev evaluation.Evaluation
			if err := json.Unmarshal([]byte(out), &ev); err != nil {
				t.Fatal(err)
			}
			if len(ev.Series) != 1 {
				t.Fatalf("evaluate reported %d series", len(ev.Series))
			}
			reports := map[string]sim.Report{"train": *tr.CheckpointTest, "evaluate": ev.Series[0].Test}
			for name, args := range map[string][]string{
				"backtest":                 {"backtest", "--checkpoint", ck, "--data", data, "--json"},
				"backtest --instrument ES": {"backtest", "--checkpoint", ck, "--data", data, "--instrument", "ES", "--json"},
			} {
				out, _ := runOK(t, args...)
				var r sim.Report
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatal(err)
				}
				reports[name] = r
			}
			want := reports["train"]
			if want.Bars < 100 {
				t.Fatalf("the test range holds %d bars", want.Bars)
			}
			for name, got := range reports {
				if got.Sharpe != want.Sharpe || got.TotalReturn != want.TotalReturn || got.MaxDrawdown != want.MaxDrawdown ||
					got.Trades != want.Trades || got.Bars != want.Bars || got.Instrument != want.Instrument ||
					got.BuyAndHold.TotalReturn != want.BuyAndHold.TotalReturn {
					t.Errorf("%s: Sharpe %v, return %v, drawdown %v, %d trades over %d bars, buy-and-hold %v, instrument %+v;\ntrain: %v, %v, %v, %d over %d, %v, %+v",
						name, got.Sharpe, got.TotalReturn, got.MaxDrawdown, got.Trades, got.Bars, got.BuyAndHold.TotalReturn, got.Instrument,
						want.Sharpe, want.TotalReturn, want.MaxDrawdown, want.Trades, want.Bars, want.BuyAndHold.TotalReturn, want.Instrument)
				}
			}
			if rule := ev.Series[0].Rule.Test; rule.Instrument != want.Instrument {
				t.Errorf("evaluate's rule trades %+v, the agent %+v", rule.Instrument, want.Instrument)
			}
			t.Logf("%s: test Sharpe %.4f, return %.4f %%, drawdown %.4f %%, %d trades; buy-and-hold return %.4f %%; point value %g, leverage %g",
				sizing, want.Sharpe, 100*want.TotalReturn, 100*want.MaxDrawdown, want.Trades, 100*want.BuyAndHold.TotalReturn,
				want.Instrument.PointValue, want.Instrument.Leverage)
		})
	}
}
