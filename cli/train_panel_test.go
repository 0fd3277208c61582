package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/research/evaluation"
)

// panelFixture copies two H4 forex slices of the walk-forward fixture into
// a data root and writes a tiny CPU config naming them as data.series:
// the root, the config file and the copies' paths.
func panelFixture(t *testing.T) (root, cfgPath string, files []string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "data")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"EURUSD_H4.csv", "USDJPY_H4.csv"} {
		raw, err := os.ReadFile(filepath.Join("..", "walkforward", "testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, n)
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	cfgPath = writeTinyConfig(t, filepath.Join(dir, "panel.json"), map[string]any{
		"steps_per_epoch": 2,
		"data":            map[string]any{"series": strings.Join(files, ",")},
		"backtest":        map[string]any{"every": 1, "patience": 5, "min_valid_t": 0},
	})
	return root, cfgPath, files
}

// TestTrainOnAPanelRecordsItAndEvaluateReloadsIt: `dqnflow train` with
// data.series trains one agent on both series (CPU, two epochs) and
// writes a checkpoint whose metadata records the panel: each series'
// file, its SHA-256 (computed here from the file's bytes) and its ranges
// (the test range ending at the file's last bar, as the default split
// does), and the first series' own instrument. `dqnflow evaluate` and
// `dqnflow backtest` of that checkpoint read the same series again and
// report, series by series and for the equal-risk portfolio, exactly what
// train reported on the test ranges. A copy of one file changed by one
// price is refused naming the file, unless --allow-changed-data.
func TestTrainOnAPanelRecordsItAndEvaluateReloadsIt(t *testing.T) {
	root, cfgPath, files := panelFixture(t)
	out := filepath.Join(t.TempDir(), "run")
	stdout, errOut, code := run(t, "train", "--config", cfgPath, "--device", "cpu", "--data-root", root, "--out", out, "--json")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	var res localrun.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("train --json: %v\n%s", err, stdout)
	}
	if len(res.Series) != 2 || res.Series[0].Name != "EURUSD_H4" || res.Series[1].Name != "USDJPY_H4" || res.CheckpointTest == nil {
		t.Fatalf("train: series %+v, checkpoint test %v; want EURUSD_H4 and USDJPY_H4 with a portfolio test report", res.Series, res.CheckpointTest)
	}
	ck, _, err := checkpoint.Read(context.Background(), res.Checkpoint, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := market.ParsePanelMeta(ck.Meta[checkpoint.MetaPanel])
	if err != nil {
		t.Fatalf("checkpoint %s: %v", checkpoint.MetaPanel, err)
	}
	if len(recs) != 2 {
		t.Fatalf("checkpoint records %d series, want 2", len(recs))
	}
	for k, r := range recs {
		raw, err := os.ReadFile(files[k])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		last, err := time.Parse(time.DateTime, strings.Split(lines[len(lines)-1], "\t")[0])
		if err != nil {
			t.Fatal(err)
		}
		if r.Path != files[k] || r.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("series %d: path %s sha256 %s; want %s %x", k, r.Path, r.SHA256, files[k], sum)
		}
		if !r.TestLast.Equal(last) || r.TestBars < 2 || r.ValidBars < 2 || r.TrainBars < 64 ||
			!r.TrainLast.Before(r.ValidFrom) || !r.ValidLast.Before(r.TestFrom) {
			t.Errorf("series %s: ranges %+v; want train < validation < test, the test ending at the last bar %s", r.Series, r, last)
		}
	}
	var inst market.Instrument
	if err := json.Unmarshal([]byte(ck.Meta[checkpoint.MetaInstrument]), &inst); err != nil || inst.Name != recs[0].Instrument || inst.Commission+inst.CommissionBps == 0 {
		t.Errorf("checkpoint instrument %+v (%v); want the first series' own %q, with its costs", inst, err, recs[0].Instrument)
	}

	evOut := filepath.Join(t.TempDir(), "eval")
	stdout, errOut, code = run(t, "evaluate", "--checkpoint", res.Checkpoint, "--data-root", root, "--out", evOut, "--json")
	if code != 0 {
		t.Fatalf("evaluate: exit %d: %s", code, errOut)
	}
	var ev evaluation.Evaluation
	if err := json.Unmarshal([]byte(stdout), &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Series) != 2 || ev.Portfolio == nil {
		t.Fatalf("evaluate: %d series, portfolio %v; want the panel's 2 and their portfolio", len(ev.Series), ev.Portfolio)
	}
	same := func(what string, a, b sim.Report) {
		t.Helper()
		if a.Sharpe != b.Sharpe || a.TotalReturn != b.TotalReturn || a.FinalEquity != b.FinalEquity || a.Trades != b.Trades || !a.From.Equal(b.From) || !a.To.Equal(b.To) {
			t.Errorf("%s: Sharpe %v return %v equity %v trades %d %s..%s; train reported Sharpe %v return %v equity %v trades %d %s..%s",
				what, a.Sharpe, a.TotalReturn, a.FinalEquity, a.Trades, a.From, a.To, b.Sharpe, b.TotalReturn, b.FinalEquity, b.Trades, b.From, b.To)
		}
	}
	for k, s := range ev.Series {
		if s.Data != files[k] {
			t.Errorf("evaluate series %d: %s, want %s", k, s.Data, files[k])
		}
		same("evaluate "+res.Series[k].Name, s.Test, *res.Series[k].Test)
	}
	same("evaluate portfolio", ev.Portfolio.Test, *res.CheckpointTest)

	stdout, errOut, code = run(t, "backtest", "--checkpoint", res.Checkpoint, "--data-root", root, "--json")
	if code != 0 {
		t.Fatalf("backtest: exit %d: %s", code, errOut)
	}
	var bt evaluation.PanelBacktest
	if err := json.Unmarshal([]byte(stdout), &bt); err != nil {
		t.Fatal(err)
	}
	if len(bt.Series) != 2 {
		t.Fatalf("backtest: %d series, want 2", len(bt.Series))
	}
	for k, s := range bt.Series {
		same("backtest "+s.Name, s.Report, *res.Series[k].Test)
	}
	same("backtest portfolio", bt.Portfolio, *res.CheckpointTest)

	// One price of the second file changed.
	raw, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	f := strings.Split(lines[100], "\t")
	c, err := strconv.ParseFloat(f[4], 64)
	if err != nil {
		t.Fatal(err)
	}
	f[4] = strconv.FormatFloat(c+0.001, 'f', 3, 64)
	lines[100] = strings.Join(f, "\t")
	if err := os.WriteFile(files[1], []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"evaluate", "--checkpoint", res.Checkpoint, "--data-root", root, "--out", t.TempDir()},
		{"backtest", "--checkpoint", res.Checkpoint, "--data-root", root},
	} {
		_, errOut, code = run(t, cmd...)
		if code == 0 || !strings.Contains(errOut, "file "+files[1]+" has SHA-256") || strings.Contains(errOut, files[0]) || !strings.Contains(errOut, "--allow-changed-data") {
			t.Errorf("%s on a changed file: exit %d: %s; want a refusal naming %s (and not %s) and --allow-changed-data", cmd[0], code, errOut, files[1], files[0])
		}
		_, errOut, code = run(t, append(cmd, "--allow-changed-data")...)
		if code != 0 || !strings.Contains(errOut, "warning: ") || !strings.Contains(errOut, files[1]) {
			t.Errorf("%s --allow-changed-data on a changed file: exit %d: %s; want it to run with a warning naming %s", cmd[0], code, errOut, files[1])
		}
	}
}

// TestTrainOnAPanelReadsOnlyInsideTheDataRoots: the files of data.series
// in a config are read only within the data roots, as data.path's are: a
// series outside them is refused by name before any training.
func TestTrainOnAPanelReadsOnlyInsideTheDataRoots(t *testing.T) {
	_, cfgPath, files := panelFixture(t)
	other := t.TempDir()
	_, errOut, code := run(t, "train", "--config", cfgPath, "--device", "cpu", "--data-root", other, "--out", filepath.Join(t.TempDir(), "run"))
	if code == 0 || !strings.Contains(errOut, "series EURUSD_H4") || !strings.Contains(errOut, files[0]) || !strings.Contains(errOut, "data root") {
		t.Errorf("train on a panel outside the data roots: exit %d: %s; want a refusal naming the series, its file and the data roots", code, errOut)
	}
	if strings.Contains(errOut, "epoch 1") {
		t.Errorf("train trained before the refusal: %s", errOut)
	}
}
