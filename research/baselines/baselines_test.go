package baselines

import (
	"slices"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
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
	ws := make([]Evidence, len(valids))
	for i := range ws {
		ws[i] = Evidence{Window: i + 1, CheckpointTest: ckTests[i]}
	}
	if err := weighEvidence(ws, valids, ckTests); err != nil {
		t.Fatal(err)
	}
	if ws[0].PooledValidT != ws[0].ValidT || ws[0].RecordT != 0 {
		t.Errorf("window 1 pools only itself and has no record: pooled t %g, own %g, record %g", ws[0].PooledValidT, ws[0].ValidT, ws[0].RecordT)
	}
	cfg := config.BacktestConfig{MinValidT: 2}
	for gate, want := range map[string][]bool{
		GateWindow: {false, false, false, true},
		GatePooled: {false, true, false, true},
		GateRecord: {false, true, true, true},
		GateNone:   {true, true, true, true},
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
