package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/research/evaluation"
	"github.com/dqnflow/dqnflow/walkforward"
)

// TestCommandsSayWhenTheCheckpointsRunRecommendedFlat: a short run on the
// synthetic series without a signal abstains under backtest.min_valid_t 2
// and trades with the gate off (ADR 0016). The checkpoint each run chose,
// and no other, records that verdict with the run's own figures; then
// evaluate, backtest and report's backtest say the run recommended
// staying flat (a line, and run_recommendation and notice in --json)
// exactly for the abstaining run's checkpoint, and nothing for the other
// or for an epoch the run did not choose.
func TestCommandsSayWhenTheCheckpointsRunRecommendedFlat(t *testing.T) {
	const line = "this checkpoint's run recommended staying flat: validation t "
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		minT float64
	}{{"flat", 2}, {"trade", 0}} {
		cfgPath := writeTinyConfig(t, filepath.Join(dir, c.name+".json"), map[string]any{
			"data":       map[string]any{"path": "synthetic", "synthetic_bars": 4000, "synthetic_phi": 0},
			"backtest":   map[string]any{"every": 1, "patience": 5, "min_valid_t": c.minT},
			"checkpoint": map[string]any{"every": 1},
		})
		out := filepath.Join(dir, c.name)
		stdout, _ := runOK(t, "train", "--device", "cpu", "--config", cfgPath, "--out", out, "--json")
		var res localrun.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%s: train --json: %v", c.name, err)
		}
		if flat := c.name == "flat"; res.Abstained != flat {
			t.Fatalf("%s: validation t %.2f, abstained %v: the case tests nothing", c.name, res.ValidT, res.Abstained)
		}

		// The chosen checkpoint records the run's verdict and figures; the
		// other epoch's records nothing.
		files, _ := filepath.Glob(filepath.Join(out, "epoch-*.safetensors"))
		if len(files) != 2 {
			t.Fatalf("%s: %d checkpoints %v, want one per epoch", c.name, len(files), files)
		}
		var other string
		for _, f := range files {
			ck, _, err := checkpoint.Read(context.Background(), f, checkpoint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rec, ok, err := checkpoint.ReadRecommendation(ck.Meta)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if f != res.Checkpoint {
				other = f
				if ok {
					t.Errorf("%s: %s, not the chosen checkpoint, records %+v", c.name, f, rec)
				}
				continue
			}
			want := checkpoint.Recommendation{ValidSharpe: res.Valid.Sharpe, ValidT: res.ValidT, MinValidT: c.minT, Recommendation: c.name}
			if !ok || math.Float64bits(rec.ValidT) != math.Float64bits(want.ValidT) || rec != want {
				t.Errorf("%s: the chosen checkpoint records %+v (ok %v), want %+v", c.name, rec, ok, want)
			}
		}

		evalText, _ := runOK(t, "evaluate", "--checkpoint", res.Checkpoint, "--data", "synthetic", "--out", filepath.Join(dir, c.name+"-eval"))
		evalJSON, _ := runOK(t, "evaluate", "--checkpoint", res.Checkpoint, "--data", "synthetic", "--out", filepath.Join(dir, c.name+"-evalj"), "--json")
		btText, _ := runOK(t, "backtest", "--checkpoint", res.Checkpoint, "--data", "synthetic")
		btJSON, _ := runOK(t, "backtest", "--checkpoint", res.Checkpoint, "--data", "synthetic", "--json")
		md, err := os.ReadFile(filepath.Join(dir, c.name+"-eval", "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		rb, _, err := evaluation.CheckpointValidation(openValidation(context.Background(), &env{}, prices.Source{}), res.Checkpoint, "synthetic", true)
		if err != nil {
			t.Fatal(err)
		}
		wantLine := ""
		if c.name == "flat" {
			wantLine = evaluation.FlatNotice(&checkpoint.Recommendation{ValidT: res.ValidT, MinValidT: c.minT, Recommendation: checkpoint.RecommendFlat})
			if !strings.HasPrefix(wantLine, line) || !strings.Contains(wantLine, "< backtest.min_valid_t 2.00 (ADR 0016)") {
				t.Fatalf("notice %q", wantLine)
			}
		}
		for name, text := range map[string]string{"evaluate": evalText, "backtest": btText, "evaluate report.md": string(md), "report": rb.Notice} {
			if got := strings.Contains(text, line); got != (wantLine != "") || wantLine != "" && !strings.Contains(text, wantLine) {
				t.Errorf("%s: %s says the run recommended flat: %v, want %v (%q)\n%s", c.name, name, got, wantLine != "", wantLine, text)
			}
		}
		var ev evaluation.Evaluation
		if err := json.Unmarshal([]byte(evalJSON), &ev); err != nil {
			t.Fatal(err)
		}
		var bt backtestResult
		if err := json.Unmarshal([]byte(btJSON), &bt); err != nil {
			t.Fatal(err)
		}
		for name, j := range map[string]struct {
			rec    *checkpoint.Recommendation
			notice string
		}{"evaluate --json": {ev.Recommendation, ev.Notice}, "backtest --json": {bt.Recommendation, bt.Notice}} {
			if j.rec == nil || j.rec.Recommendation != c.name || j.rec.ValidT != res.ValidT || j.rec.MinValidT != c.minT || j.notice != wantLine {
				t.Errorf("%s: %s: run_recommendation %+v, notice %q; want %s at t %v, notice %q", c.name, name, j.rec, j.notice, c.name, res.ValidT, wantLine)
			}
		}
		if bt.Bars < 2 || bt.Bars != ev.Series[0].Test.Bars {
			t.Errorf("%s: backtest --json reports %d bars, evaluate %d: the report is not the test range's", c.name, bt.Bars, ev.Series[0].Test.Bars)
		}

		// An epoch the run did not choose says nothing, in text or JSON.
		text, _ := runOK(t, "backtest", "--checkpoint", other, "--data", "synthetic")
		j, _ := runOK(t, "backtest", "--checkpoint", other, "--data", "synthetic", "--json")
		if strings.Contains(text, line) || strings.Contains(j, "run_recommendation") || strings.Contains(j, "notice") {
			t.Errorf("%s: backtest of %s, which the run did not choose, mentions a recommendation:\n%s\n%s", c.name, other, text, j)
		}
	}
}

// TestMalformedRecommendationFailsTheCommand: a checkpoint whose
// recommendation value is not "trade" or "flat" is refused by backtest
// and evaluate with an error naming the file, the key and the value.
func TestMalformedRecommendationFailsTheCommand(t *testing.T) {
	dir := t.TempDir()
	runOK(t, "train", "--device", "cpu", "--config", tinyConfig(t, dir), "--data", "synthetic", "--epochs", "1", "--out", dir)
	path := filepath.Join(dir, "epoch-000001.safetensors")
	ck, _, err := checkpoint.Read(context.Background(), path, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := checkpoint.ReadRecommendation(ck.Meta); !ok || err != nil {
		t.Fatalf("the run's only checkpoint records no recommendation (ok %v, err %v)", ok, err)
	}
	ck.Meta[checkpoint.MetaRecommendation] = "maybe"
	if _, err := checkpoint.Write(path, ck, checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"backtest", "--checkpoint", path, "--data", "synthetic"},
		{"evaluate", "--checkpoint", path, "--data", "synthetic", "--out", filepath.Join(dir, "eval")},
	} {
		_, errOut, code := run(t, args...)
		if code == 0 {
			t.Errorf("%s: exit 0 on a malformed recommendation", args[0])
		}
		for _, s := range []string{path, `"recommendation"`, `"maybe"`} {
			if !strings.Contains(errOut, s) {
				t.Errorf("%s: error %q does not name %s", args[0], errOut, s)
			}
		}
	}
}

// TestWalkForwardCheckpointsRecordTheirRunsRecommendation: each window's
// chosen checkpoint (--checkpoints) records its run's validation figures,
// as results.json reports them, and the single-run verdict on them
// (ADR 0016: flat below backtest.min_valid_t), whichever gate the study
// reports by.
func TestWalkForwardCheckpointsRecordTheirRunsRecommendation(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeTinyConfig(t, filepath.Join(dir, "tiny.json"), map[string]any{
		"backtest": map[string]any{"every": 1, "patience": 5, "min_valid_t": 2},
	})
	out := filepath.Join(dir, "wf")
	runOK(t, "walkforward", "--config", cfgPath, "--device", "cpu", "--series", "../walkforward/testdata/EURUSD_H4.csv",
		"--step", "1w", "--test", "1w", "--valid", "1w", "--min-train", "0", "--seeds", "1", "--checkpoints", "--out", out)
	res := readStudy(t, out)
	n := 0
	for _, r := range res.Results {
		if r.Strategy != walkforward.StrategyAgent {
			continue
		}
		path := filepath.Join(out, fmt.Sprintf("window-%d", r.Window), r.Series, fmt.Sprintf("seed-%d.safetensors", r.Seed))
		ck, _, err := checkpoint.Read(context.Background(), path, checkpoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rec, ok, err := checkpoint.ReadRecommendation(ck.Meta)
		want := checkpoint.NewRecommendation(r.ValidSharpe, r.ValidT, 2, !(r.ValidT >= 2))
		if err != nil || !ok || rec != want {
			t.Errorf("%s: recommendation %+v (ok %v, err %v), want %+v", path, rec, ok, err, want)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("results.json has no agent result")
	}
}
