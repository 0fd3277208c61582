package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
)

// TestBaselinesChooseOnValidationOnWalkforwardsWindows: the rules run on
// the windows walkforward lays with the same flags; each window's rule is
// the one of best validation Sharpe among every rule of the family (the
// first on a tie), checked here by backtesting each rule again; every gate
// and every rule's joined test ranges are reported; bad lookbacks are
// refused by name.
func TestBaselinesChooseOnValidationOnWalkforwardsWindows(t *testing.T) {
	dir := t.TempDir()
	cfgPath := tinyConfig(t, dir)
	out, _ := runOK(t, "baselines", "--config", cfgPath, "--data", "bundled:bitcoin_2024.csv", "--windows", "2",
		"--test-bars", "300", "--valid-bars", "200", "--lookbacks", "6,24", "--out", filepath.Join(dir, "bl.json"), "--json")
	var res baselinesResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Windows) != 2 || len(res.Rules) != 8 || len(res.Hindsight) != 8 || len(res.Gates) != 4 {
		t.Fatalf("%d windows, %d rules, %d hindsight rows, %d gates; want 2, 8, 8, 4", len(res.Windows), len(res.Rules), len(res.Hindsight), len(res.Gates))
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data.Path = "bundled:bitcoin_2024.csv"
	b, err := market.Load(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range res.Windows {
		if w.Ranges.Test.To != 6115-300*(1-i) || w.Test.Bars != 300 || w.Ranges.Valid.Len() != 200 {
			t.Errorf("window %d: ranges %+v, %d test bars; want walkforward's", i+1, w.Ranges, w.Test.Bars)
		}
		ds, err := market.Prepare(context.Background(), prices.Source{}, windowConfig(cfg, b, w.Ranges))
		if err != nil {
			t.Fatal(err)
		}
		best, bestS := "", 0.0
		for _, r := range sim.Rules([]int{6, 24}) {
			v, err := sim.Backtest(ds, w.Ranges.Valid, r.Policy(b))
			if err != nil {
				t.Fatal(err)
			}
			if best == "" || v.Sharpe > bestS {
				best, bestS = r.Name(), v.Sharpe
			}
		}
		if w.Chosen != best || w.Evidence.ValidSharpe != bestS {
			t.Errorf("window %d: chose %s (validation Sharpe %g), want %s (%g)", i+1, w.Chosen, w.Evidence.ValidSharpe, best, bestS)
		}
	}
	if res.Gates[3].Gate != gateNone || !res.Gates[3].Traded[0] || !res.Gates[3].Traded[1] {
		t.Errorf("gate none: %+v, want both windows traded", res.Gates[3])
	}
	for _, bad := range []string{"6,x", "0", "6,6"} {
		_, errOut, code := run(t, "baselines", "--data", "bundled:bitcoin_2024.csv", "--lookbacks", bad)
		if code == 0 || !strings.Contains(errOut, "--lookbacks") || !strings.Contains(errOut, "item") {
			t.Errorf("--lookbacks %q: exit %d, %q; want an error naming --lookbacks and the item", bad, code, errOut)
		}
	}
}
