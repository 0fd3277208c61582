package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/localrun"
)

// TestRunWithoutValidationEvidenceRecommendsFlat: a short run on the
// synthetic series without a signal has no validation Sharpe worth its
// name; with backtest.min_valid_t it abstains (flat on the test range, the
// checkpoint's own test report kept beside it), and with the gate off it
// reports the checkpoint as before (ADR 0016).
func TestRunWithoutValidationEvidenceRecommendsFlat(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		minT float64
	}{{"gate", 2}, {"off", 0}} {
		path := writeTinyConfig(t, filepath.Join(dir, c.name+".json"), map[string]any{
			"data":     map[string]any{"path": "synthetic", "synthetic_bars": 4000, "synthetic_phi": 0},
			"backtest": map[string]any{"every": 1, "patience": 5, "min_valid_t": c.minT},
		})
		stdout, _ := runOK(t, "train", "--device", "cpu", "--config", path, "--out", filepath.Join(dir, c.name), "--json")
		var res localrun.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%s: train --json: %v", c.name, err)
		}
		if res.Test == nil || res.CheckpointTest == nil {
			t.Fatalf("%s: test %v, checkpoint test %v: want both", c.name, res.Test, res.CheckpointTest)
		}
		t.Logf("%s: validation Sharpe %.3f (t %.2f), abstained %v; test trades %d, checkpoint's %d",
			c.name, res.Valid.Sharpe, res.ValidT, res.Abstained, res.Test.Trades, res.CheckpointTest.Trades)
		switch {
		case c.minT == 0 && (res.Abstained || res.Test.Sharpe != res.CheckpointTest.Sharpe || res.Test.Trades != res.CheckpointTest.Trades):
			t.Errorf("gate off: abstained %v, test %+v: want the checkpoint's report", res.Abstained, res.Test.Metrics)
		case c.minT > 0 && res.ValidT < c.minT && (!res.Abstained || res.Test.Trades != 0 || res.Test.Sharpe != 0 || res.Test.Turnover != 0):
			t.Errorf("validation t %.2f below %g: abstained %v, test %+v: want flat", res.ValidT, c.minT, res.Abstained, res.Test.Metrics)
		case c.minT > 0 && res.ValidT >= c.minT:
			t.Fatalf("a 2-epoch run on noise shows t = %.2f: the case tests nothing", res.ValidT)
		}
		text, _ := runOK(t, "train", "--device", "cpu", "--config", path, "--out", filepath.Join(dir, c.name+"-text"))
		if got := strings.Contains(text, "recommends flat"); got != (c.minT > 0) {
			t.Errorf("%s: output says it recommends flat: %v\n%s", c.name, got, text)
		}
	}
}
