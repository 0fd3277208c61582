package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/walkforward"
)

// TestWalkForwardRunsTheCalendarStudy: the command runs the reduced study
// on the walkforward package's three corpus slices (weekly windows, two
// seeds, one series left out), writes results.json with every result and
// prints the per-series table and the timings. walkforward's own
// TestStudyEndToEnd checks the figures; this checks the command's wiring.
func TestWalkForwardRunsTheCalendarStudy(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeTinyConfig(t, filepath.Join(dir, "tiny.json"), map[string]any{
		"backtest": map[string]any{"every": 1, "patience": 5, "min_valid_t": 2},
	})
	out := filepath.Join(dir, "wf")
	stdout, errOut, code := run(t, "walkforward", "--config", cfgPath, "--device", "cpu",
		"--series", "../walkforward/testdata/EURUSD_H4.csv,../walkforward/testdata/GBPUSD_H4.csv,../walkforward/testdata/USDJPY_H4.csv",
		"--step", "1w", "--test", "1w", "--valid", "1w", "--min-train", "0", "--seeds", "2", "--leave-out", "GBPUSD_H4", "--prior-trials", "4",
		"--checkpoints", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	res := readStudy(t, out)
	if len(res.Windows) != 2 || len(res.Results) != 30 || res.Trials != (walkforward.Trials{Study: 1, Prior: 4, Total: 5}) || len(res.Seeds) != 2 {
		t.Errorf("results.json: %d windows, %d results, trials %+v, seeds %v; want 2, 30, 1+4 and two seeds", len(res.Windows), len(res.Results), res.Trials, res.Seeds)
	}
	for _, f := range []string{"summary.json", "summary.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("the study wrote no %s: %v", f, err)
		}
	}
	if !strings.Contains(stdout, "agent portfolio (mean of 2 seeds) Sharpe") || !strings.Contains(stdout, "DSR") || !strings.Contains(stdout, "(5 trials)") {
		t.Errorf("output has no headline with the DSR of 5 trials:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "window-1", "USDJPY_H4", "seed-2.safetensors")); err != nil {
		t.Errorf("--checkpoints: %v", err)
	}
	for _, want := range []string{"GBPUSD_H4 (left out)", "window 0: USDJPY_H4 sits out", "5 configuration(s) tried"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output has no %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(errOut, "window 1 (test 2015-03-25 to 2015-04-01, 3 of 3 series)") || !strings.Contains(errOut, "train ") {
		t.Errorf("stderr has no timing line for window 1:\n%s", errOut)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--leave-out", "XAU"}, "--leave-out"},
		{[]string{"--step", "1m"}, "--step"},
		{[]string{"--seeds", "0"}, "--seeds"},
		{[]string{"--gate", "record"}, "gate"},
	} {
		args := append([]string{"walkforward", "--config", cfgPath, "--device", "cpu", "--series", "../walkforward/testdata/EURUSD_H4.csv,../walkforward/testdata/GBPUSD_H4.csv"}, bad.args...)
		if _, errOut, code := run(t, args...); code == 0 || !strings.Contains(errOut, bad.want) {
			t.Errorf("walkforward %v: exit %d, %q; want an error naming %s", bad.args, code, errOut, bad.want)
		}
	}
}
