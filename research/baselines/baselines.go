// Package baselines is the yardstick of the agent: on k consecutive
// bar-count windows at the end of one series, it backtests every simple
// rule of a family (sim.Rules: momentum and reversal over several
// lookbacks) on each window's validation and test ranges with the data's
// instrument and costs, lets validation choose one rule per window, and
// reports that choice's test ranges per window and joined, under every
// gate (the chosen rule stands in for the window's checkpoint). No
// training: it takes seconds. The agent should beat it before it trades.
package baselines

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/usage"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/walkforward"
)

// Result is what "dqnflow baselines --json" prints: on
// consecutive bar-count windows of one series, the simple rules (sim.Rules) a trader would
// try before an agent.
type Result struct {
	Data string `json:"data"`
	// Lookbacks and Rules are the family searched, in order.
	Lookbacks []int    `json:"lookbacks"`
	Rules     []string `json:"rules"`
	// Windows is, per window, the rule its validation range chose and its
	// test report; Gates the record of that choice under every gate
	// (GateWindow …).
	Windows []WindowResult `json:"windows"`
	Gates   []GateResult   `json:"Gates"`
	// Hindsight is every rule's test ranges joined, each rule the same in
	// every window: what a choice made knowing the test ranges could
	// have had. It is no result, only a bound.
	Hindsight []RuleResult `json:"hindsight"`
}

// WindowResult is one window of a Result.
type WindowResult struct {
	Window int    `json:"window"`
	Ranges Window `json:"ranges"`
	// Chosen is the rule of best validation Sharpe (the first listed on
	// a tie); Evidence its validation and record statistics and Test its
	// test report, traded or not.
	Chosen   string     `json:"chosen"`
	Evidence Evidence   `json:"evidence"`
	Test     sim.Report `json:"test"`
}

// RuleResult is one rule on every window's test range, joined.
type RuleResult struct {
	Rule   string     `json:"rule"`
	Pooled sim.Report `json:"pooled_test"`
}

// Rules backtests the rules of lookbacks lbs on windows ws of bars
// b (walkWindows), lets each window's validation range choose one, and
// judges the choices under every gate (without pooled where overlap says
// the validation ranges overlap), as "dqnflow baselines" reports them. Each
// window's dataset is prepared from src.
func Rules(ctx context.Context, src prices.Source, cfg config.RunConfig, b *prices.Bars, ws []Window, lbs []int, overlap bool) (Result, error) {
	rules := sim.Rules(lbs)
	res := Result{Data: cfg.Data.Path, Lookbacks: lbs}
	for _, r := range rules {
		res.Rules = append(res.Rules, r.Name())
	}
	evidence := make([]Evidence, len(ws))
	var valids, tests, flats []sim.Report
	perRule := make([][]sim.Report, len(rules)) // test reports by rule, then window
	for i, w := range ws {
		ds, err := market.Prepare(ctx, src, WindowConfig(cfg, b, w))
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		validB, err := sim.NewBenchmarks(ds, w.Valid)
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		testB, err := sim.NewBenchmarks(ds, w.Test)
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		best, bestValid, err := BestOnValidation(ds, w.Valid, rules, validB)
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		for j, r := range rules {
			t, err := sim.BacktestWith(ds, w.Test, r.Policy(b), testB)
			if err != nil {
				return res, fmt.Errorf("window %d, %s: %w", i+1, r.Name(), err)
			}
			perRule[j] = append(perRule[j], t)
		}
		flat, err := sim.BacktestWith(ds, w.Test, flat{}, testB)
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		evidence[i] = Evidence{Window: i + 1, Ranges: w, CheckpointTest: perRule[best][i]}
		valids, tests, flats = append(valids, bestValid), append(tests, perRule[best][i]), append(flats, flat)
		res.Windows = append(res.Windows, WindowResult{Window: i + 1, Ranges: w, Chosen: rules[best].Name(), Test: perRule[best][i]})
	}
	if err := weighEvidence(evidence, valids, tests); err != nil {
		return res, err
	}
	for i := range res.Windows {
		res.Windows[i].Evidence = evidence[i]
	}
	gatesRun := Gates
	if overlap {
		gatesRun = []string{GateWindow, GateRecord, GateNone}
	}
	for _, g := range gatesRun {
		gr, err := applyGate(cfg.Backtest, g, evidence, flats)
		if err != nil {
			return res, err
		}
		res.Gates = append(res.Gates, gr)
	}
	for j, r := range rules {
		p, err := sim.Pool(perRule[j])
		if err != nil {
			return res, fmt.Errorf("%s: %w", r.Name(), err)
		}
		res.Hindsight = append(res.Hindsight, RuleResult{Rule: r.Name(), Pooled: p})
	}
	return res, nil
}

// BestOnValidation is walkforward.BestRule: the rule of best validation
// Sharpe among rules on bars valid of ds, the first on a tie, and its
// report (bench, when not nil, must be that range's benchmarks: it is
// checked, and BestRule computes its own).
func BestOnValidation(ds *market.Dataset, valid market.Range, rules []sim.Rule, bench *sim.Benchmarks) (int, sim.Report, error) {
	if bench != nil && !bench.For(ds, valid) {
		return 0, sim.Report{}, fmt.Errorf("best rule: benchmarks given for another range or dataset")
	}
	return walkforward.BestRule(ds, valid, rules)
}

// Print writes res per window and under every gate, then the
// hindsight bound.
func Print(w io.Writer, cfg config.RunConfig, b *prices.Bars, res Result) {
	fmt.Fprintf(w, "simple rules on %s: %d windows, %d rules (momentum and reversal over lookbacks %s bars, long-short and long-only); validation chooses one per window\n",
		res.Data, len(res.Windows), len(res.Rules), JoinInts(res.Lookbacks))
	fmt.Fprintf(w, "%-7s %-35s %-24s %14s %14s %7s %10s %10s %10s %10s %10s\n", "window", "test range", "chosen rule", "valid S (t)", "record S (t)",
		"trades", "return", "Sharpe", "max DD", "B&H Sharpe", "B&H DD")
	for _, x := range res.Windows {
		t, ev := x.Test, x.Evidence
		fmt.Fprintf(w, "%-7d %-35s %-24s %14s %14s %7d %9.2f%% %10.3f %9.2f%% %10.3f %9.2f%%\n", x.Window, barsSpan(b, x.Ranges.Test), x.Chosen,
			fmt.Sprintf("%.2f (%.2f)", ev.ValidSharpe, ev.ValidT), fmt.Sprintf("%.2f (%.2f)", ev.RecordSharpe, ev.RecordT),
			t.Trades, 100*t.TotalReturn, t.Sharpe, 100*t.MaxDrawdown, t.BuyAndHold.Sharpe, 100*t.BuyAndHold.MaxDrawdown)
	}
	fmt.Fprintf(w, "the chosen rules under every gate (test ranges joined; a window trades where the gate's evidence has t >= %g):\n", cfg.Backtest.MinValidT)
	for _, g := range res.Gates {
		n := 0
		for _, tr := range g.Traded {
			if tr {
				n++
			}
		}
		p := g.Pooled
		fmt.Fprintf(w, "  %-7s traded %d of %d windows: Sharpe %.3f, return %.2f%%, max drawdown %.2f%%, trades %d (buy-and-hold: Sharpe %.3f, max drawdown %.2f%%)\n",
			g.Gate, n, len(g.Traded), p.Sharpe, 100*p.TotalReturn, 100*p.MaxDrawdown, p.Trades, p.BuyAndHold.Sharpe, 100*p.BuyAndHold.MaxDrawdown)
	}
	hs := slices.Clone(res.Hindsight)
	slices.SortStableFunc(hs, func(a, b RuleResult) int {
		switch {
		case a.Pooled.Sharpe > b.Pooled.Sharpe:
			return -1
		case a.Pooled.Sharpe < b.Pooled.Sharpe:
			return 1
		}
		return 0
	})
	above := 0
	for _, h := range hs {
		if h.Pooled.Sharpe > h.Pooled.BuyAndHold.Sharpe {
			above++
		}
	}
	fmt.Fprintf(w, "in hindsight (a bound, not a result: each rule in every window, test ranges joined), %d of %d rules beat buy-and-hold's Sharpe; the best:\n", above, len(hs))
	for _, h := range hs[:min(5, len(hs))] {
		p := h.Pooled
		fmt.Fprintf(w, "  %-24s Sharpe %7.3f, return %8.2f%%, max drawdown %6.2f%%, trades %d\n", h.Rule, p.Sharpe, 100*p.TotalReturn, 100*p.MaxDrawdown, p.Trades)
	}
}

// Layout lays the bar-count windows over bars b, filling in the
// defaults of --test-bars (30 % of the bars after the feature warmup,
// over the windows) and --valid-bars (--test-bars).
func Layout(b *prices.Bars, cfg config.RunConfig, k int, testBars, validBars *int, trainBars int) ([]Window, error) {
	usable := b.Len() - market.FeatureWarmup
	if *testBars == 0 {
		*testBars = int(0.3 * float64(usable) / float64(max(k, 1)))
	}
	if *validBars == 0 {
		*validBars = *testBars
	}
	return walkWindows(b.Len(), market.FeatureWarmup, k, *testBars, *validBars, trainBars, cfg.Env.EpisodeBars+2)
}

// JoinInts is xs comma-separated.
func JoinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// The bar-count windows below are the old walkforward's, kept for
// `dqnflow baselines` (a quick yardstick on one series, no training);
// `dqnflow walkforward` is the calendar study of package walkforward
// (ADR 0038).

// Window is one walk-forward window: bar ranges of the data.
type Window struct {
	Train market.Range `json:"train"`
	Valid market.Range `json:"validation"`
	Test  market.Range `json:"test"`
}

// walkWindows lays k windows over bars [warmup, n): the test ranges are
// the last k·test bars in k consecutive blocks, each preceded by valid
// validation bars, and training takes the train bars before that (every
// earlier bar after the warmup when train is 0: an expanding window). The
// error names the flag to change.
func walkWindows(n, warmup, k, test, valid, train, minTrain int) ([]Window, error) {
	if k < 1 || test < 2 || valid < 2 || train < 0 {
		return nil, fmt.Errorf("%w: --windows %d, --test-bars %d, --valid-bars %d, --train-bars %d: need at least 1 window, 2 test and 2 validation bars, and no negative count",
			usage.Err, k, test, valid, train)
	}
	ws := make([]Window, k)
	for i := range k {
		te := market.Range{From: n - (k-i)*test, To: n - (k-i-1)*test}
		va := market.Range{From: te.From - valid, To: te.From}
		from := warmup
		if train > 0 {
			from = max(va.From-train, warmup)
		}
		tr := market.Range{From: from, To: va.From}
		if tr.Len() < minTrain {
			return nil, fmt.Errorf("%w: window %d of %d trains on %s (%d bars); it needs at least env.episode_bars+2 = %d: lower --windows, --test-bars or --valid-bars",
				usage.Err, i+1, k, tr, max(tr.Len(), 0), minTrain)
		}
		ws[i] = Window{Train: tr, Valid: va, Test: te}
	}
	return ws, nil
}

// WindowConfig is cfg with the data ranges of w given by bar times.
func WindowConfig(cfg config.RunConfig, b *prices.Bars, w Window) config.RunConfig {
	at := func(i int) string { return b.Time[i].Format(time.RFC3339Nano) }
	d := &cfg.Data
	d.ValidBars, d.TrainBars, d.TestBars = 0, 0, 0
	d.TrainFrom, d.TrainTo = at(w.Train.From), at(w.Train.To)
	d.ValidFrom, d.ValidTo = at(w.Valid.From), at(w.Valid.To)
	d.TestFrom, d.TestTo = at(w.Test.From), ""
	if w.Test.To < b.Len() {
		d.TestTo = at(w.Test.To)
	}
	return cfg
}

// The evidence that lets a window of the bar-count layout trade its test
// range (what `dqnflow baselines` reports for the rule it chose), each
// judged at backtest.min_valid_t:
//   - window: its own run's validation backtest (the rule of every local
//     run, ADR 0016);
//   - pooled: the validation backtests of it and every earlier window,
//     joined; like window's, each was the best of the run's validation
//     backtests, so this evidence is biased upwards by that choice;
//   - record: the test backtests of every earlier window's checkpoint,
//     joined: the procedure's own out-of-sample record, on ranges that no
//     choice saw. The first window has none and stays flat;
//   - none: every window trades its checkpoint, whatever the evidence
//     (what a walk-forward without ADR 0016's rule reports).
//
// Every range each gate reads ends before the window's test range begins.
// record is the default: the only evidence no choice biased (ADR 0016's
// walk-forward section has the measurements).
const (
	GateWindow = "window"
	GatePooled = "pooled"
	GateRecord = "record"
	GateNone   = "none"
)

// Gates lists the gates in the order the summary shows them.
var Gates = []string{GateWindow, GatePooled, GateRecord, GateNone}

// GateResult is what one gate made of a walk-forward's windows.
type GateResult struct {
	Gate   string     `json:"gate"`
	Traded []bool     `json:"traded"` // per window
	Pooled sim.Report `json:"pooled"` // the test ranges as the gate traded them, joined
}

// Evidence is what one window's choice rests on, and what it earned.
type Evidence struct {
	Window    int    `json:"window"`
	Ranges    Window `json:"ranges"`
	BestEpoch int    `json:"best_epoch"`
	// ValidSharpe and ValidT are the chosen checkpoint's on the window's
	// own validation range; PooledValidSharpe and PooledValidT are those
	// of windows 1 … this one's validation backtests joined (sim.Pool),
	// each window's checkpoint on its own range; RecordSharpe and RecordT
	// those of the test backtests of windows 1 … this one − 1 joined (0
	// for the first window).
	ValidSharpe       float64 `json:"validation_sharpe"`
	ValidT            float64 `json:"validation_sharpe_t"`
	PooledValidSharpe float64 `json:"pooled_validation_sharpe"`
	PooledValidT      float64 `json:"pooled_validation_sharpe_t"`
	RecordSharpe      float64 `json:"record_sharpe"`
	RecordT           float64 `json:"record_sharpe_t"`
	// Traded is set when the gate's evidence reached backtest.min_valid_t:
	// Test is then the checkpoint's test backtest, else flat's.
	// CheckpointTest is the checkpoint's, whichever the gate chose.
	Traded         bool       `json:"traded"`
	Test           sim.Report `json:"test"`
	CheckpointTest sim.Report `json:"checkpoint_test"`
}

// weighEvidence fills the evidence fields of ws from each window's
// chosen checkpoint's validation and test backtests, in the windows'
// order.
func weighEvidence(ws []Evidence, valids, ckTests []sim.Report) error {
	for i := range ws {
		w := &ws[i]
		w.ValidSharpe, w.ValidT = valids[i].Sharpe, valids[i].SharpeT()
		pooled, err := sim.Pool(valids[:i+1])
		if err != nil {
			return fmt.Errorf("window %d: pool validation: %w", i+1, err)
		}
		w.PooledValidSharpe, w.PooledValidT = pooled.Sharpe, pooled.SharpeT()
		w.RecordSharpe, w.RecordT = 0, 0
		if i > 0 {
			record, err := sim.Pool(ckTests[:i])
			if err != nil {
				return fmt.Errorf("window %d: pool the earlier test ranges: %w", i+1, err)
			}
			w.RecordSharpe, w.RecordT = record.Sharpe, record.SharpeT()
		}
	}
	return nil
}

// trades reports whether gate lets window w trade its test range.
func (w Evidence) trades(cfg config.BacktestConfig, gate string) bool {
	switch gate {
	case GatePooled:
		return !cfg.NoEdge(w.PooledValidT)
	case GateRecord:
		return w.Window > 1 && !cfg.NoEdge(w.RecordT)
	case GateNone:
		return true
	default:
		return !cfg.NoEdge(w.ValidT)
	}
}

// applyGate returns gate's verdicts on ws and the test ranges as it
// traded them (the checkpoint's test backtest where it trades, flats[i]
// where not), joined.
func applyGate(cfg config.BacktestConfig, gate string, ws []Evidence, flats []sim.Report) (GateResult, error) {
	g := GateResult{Gate: gate, Traded: make([]bool, len(ws))}
	tests := make([]sim.Report, len(ws))
	for i, w := range ws {
		g.Traded[i], tests[i] = w.trades(cfg, gate), flats[i]
		if g.Traded[i] {
			tests[i] = w.CheckpointTest
		}
	}
	var err error
	if g.Pooled, err = sim.Pool(tests); err != nil {
		return g, fmt.Errorf("gate %s: %w", gate, err)
	}
	return g, nil
}

// flat stays flat: what a window that does not trade earns.
type flat struct{}

// Act returns flat.
func (flat) Act(int, []float32) market.Action { return market.Action{Dir: model.FlatDir} }

// barsSpan is "first .. last" bar time of r.
func barsSpan(b *prices.Bars, r market.Range) string {
	if r.Len() <= 0 {
		return "-"
	}
	return b.Time[r.From].Format("2006-01-02 15:04") + " .. " + b.Time[r.To-1].Format("2006-01-02 15:04")
}
