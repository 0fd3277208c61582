package cli

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/research/evaluation"
)

// TestReportBacktestMatchesTheBacktestCommand: the report's backtest of a
// checkpoint is the one "dqnflow backtest" measures (same equity), its
// buy-and-hold curve ends where the report's buy-and-hold metrics say,
// there is one action per decision bar, and mean Q is finite.
func TestReportBacktestMatchesTheBacktestCommand(t *testing.T) {
	dir := t.TempDir()
	data := "bundled:USA500IDXUSD_H1.csv"
	runOK(t, "train", "--device", "cpu", "--config", tinyConfig(t, dir), "--data", data, "--epochs", "1", "--out", dir)
	ck := filepath.Join(dir, "epoch-000001.safetensors")
	b, meanQ, err := evaluation.CheckpointValidation(openValidation(context.Background(), &env{}, prices.Source{}), ck, data, true)
	if err != nil {
		t.Fatal(err)
	}
	pol, ds, r, _, _, err := openPolicyData(context.Background(), &env{}, prices.Source{}, ck, data, "validation", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pol.Backtest(ds, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Equity) != len(want.Equity) || b.Equity[len(b.Equity)-1] != want.Equity[len(want.Equity)-1] {
		t.Errorf("report equity ends at %v after %d bars, backtest at %v after %d", b.Equity[len(b.Equity)-1], len(b.Equity),
			want.Equity[len(want.Equity)-1], len(want.Equity))
	}
	bh := b.BuyAndHold[len(b.BuyAndHold)-1]/b.BuyAndHold[0] - 1
	if math.Abs(bh-want.BuyAndHold.TotalReturn) > 1e-12 {
		t.Errorf("buy-and-hold curve returns %v, the report's buy-and-hold %v", bh, want.BuyAndHold.TotalReturn)
	}
	if len(b.Actions) != len(b.Equity)-1 || len(b.Times) != len(b.Equity) || !b.Times[0].Equal(want.From) {
		t.Errorf("%d actions, %d times for %d equity values from %v; want one action per bar but the last, from %v",
			len(b.Actions), len(b.Times), len(b.Equity), b.Times[0], want.From)
	}
	if math.IsNaN(meanQ) || math.IsInf(meanQ, 0) || meanQ == 0 {
		t.Errorf("mean Q = %v, want a finite, non-zero value", meanQ)
	}
}
