package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/walkforward"
)

// baselinesResult is what "dqnflow baselines --json" prints: on
// consecutive bar-count windows of one series, the simple rules (sim.Rules) a trader would
// try before an agent.
type baselinesResult struct {
	Data string `json:"data"`
	// Lookbacks and Rules are the family searched, in order.
	Lookbacks []int    `json:"lookbacks"`
	Rules     []string `json:"rules"`
	// Windows is, per window, the rule its validation range chose and its
	// test report; Gates the record of that choice under every gate
	// (gateWindow …).
	Windows []blWindow     `json:"windows"`
	Gates   []wfGateResult `json:"gates"`
	// Hindsight is every rule's test ranges joined, each rule the same in
	// every window: what a choice made knowing the test ranges could
	// have had. It is no result, only a bound.
	Hindsight []blRule `json:"hindsight"`
}

type blWindow struct {
	Window int      `json:"window"`
	Ranges wfWindow `json:"ranges"`
	// Chosen is the rule of best validation Sharpe (the first listed on
	// a tie); Evidence its validation and record statistics and Test its
	// test report, traded or not.
	Chosen   string     `json:"chosen"`
	Evidence wfResult   `json:"evidence"`
	Test     sim.Report `json:"test"`
}

type blRule struct {
	Rule   string     `json:"rule"`
	Pooled sim.Report `json:"pooled_test"`
}

// baselinesCmd is "dqnflow baselines": on k consecutive bar-count
// windows at the end of one series (walkWindows), it backtests every
// rule of the family on each window's validation and test ranges with the
// data's instrument and costs, lets validation choose one rule per window,
// and reports that choice's test ranges per window and joined, under
// every gate (the chosen rule stands in for the window's
// checkpoint). No training: it takes seconds. What it measures is how
// much a simple rule, chosen as the agent's checkpoint is chosen, earns
// on the same test ranges; the agent should beat it before it trades.
func baselinesCmd(e *env) *cobra.Command {
	cmd := leaf("baselines",
		"simple rules on bar-count windows of one series, no training",
		"baselines runs momentum and reversal rules on consecutive bar-count windows at the end of one series, each chosen on the window's validation range, and reports their test metrics per window and joined: the yardstick of the agent.",
		"dqnflow baselines --data bundled:USA500IDXUSD_H1.csv            # four windows, momentum and reversal chosen on validation",
		"dqnflow baselines --data bundled:bitcoin_2024.csv --lookbacks 6,24,120 --json")
	fs := cmd.Flags()
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults); its data and env sections apply")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	k := fs.Int("windows", 4, "number of consecutive windows")
	testBars := fs.Int("test-bars", 0, "test bars per window (default: 30% of the bars after the feature warmup, split over the windows)")
	validBars := fs.Int("valid-bars", 0, "validation bars per window (default: --test-bars)")
	trainBars := fs.Int("train-bars", 0, "training bars per window (default 0: every earlier bar); rules do not train, but the instrument's point value comes from the last training bar, as in a run")
	lookbacks := fs.String("lookbacks", joinInts(sim.DefaultLookbacks), "lookbacks of the rules, in bars, comma-separated")
	out := fs.String("out", "", "also write the result as JSON to this file")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	df := addDataFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		cfg, err := loadConfig(fs, *cfgPath, "", *dataPath, 0)
		if err != nil {
			return err
		}
		src, err := df.source(*dataPath)
		if err != nil {
			return err
		}
		b, err := market.Load(ctx, src, cfg)
		if err != nil {
			return err
		}
		lbs, err := sim.ParseLookbacks(*lookbacks, b.Len())
		if err != nil {
			return fmt.Errorf("%w: --lookbacks %q: %v", errUsage, *lookbacks, err)
		}
		ws, err := wfLayout(b, cfg, *k, testBars, validBars, *trainBars)
		if err != nil {
			return err
		}
		res, err := ruleBaselines(ctx, src, cfg, b, ws, lbs, *validBars > *testBars)
		if err != nil {
			return err
		}
		if *out != "" {
			if err := writeJSONFile(*out, res); err != nil {
				return err
			}
		}
		if *jsonOut {
			return printJSON(e, res)
		}
		printBaselines(e, cfg, b, res)
		return nil
	}
	return cmd
}

// ruleBaselines backtests the rules of lookbacks lbs on windows ws of bars
// b (walkWindows), lets each window's validation range choose one, and
// judges the choices under every gate (without pooled where overlap says
// the validation ranges overlap), as "dqnflow baselines" reports them. Each
// window's dataset is prepared from src.
func ruleBaselines(ctx context.Context, src prices.Source, cfg config.RunConfig, b *prices.Bars, ws []wfWindow, lbs []int, overlap bool) (baselinesResult, error) {
	rules := sim.Rules(lbs)
	res := baselinesResult{Data: cfg.Data.Path, Lookbacks: lbs}
	for _, r := range rules {
		res.Rules = append(res.Rules, r.Name())
	}
	evidence := make([]wfResult, len(ws))
	var valids, tests, flats []sim.Report
	perRule := make([][]sim.Report, len(rules)) // test reports by rule, then window
	for i, w := range ws {
		ds, err := market.Prepare(ctx, src, windowConfig(cfg, b, w))
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
		best, bestValid, err := bestOnValidation(ds, w.Valid, rules, validB)
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
		flat, err := sim.BacktestWith(ds, w.Test, flatPolicy{}, testB)
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		evidence[i] = wfResult{Window: i + 1, Ranges: w, CheckpointTest: perRule[best][i]}
		valids, tests, flats = append(valids, bestValid), append(tests, perRule[best][i]), append(flats, flat)
		res.Windows = append(res.Windows, blWindow{Window: i + 1, Ranges: w, Chosen: rules[best].Name(), Test: perRule[best][i]})
	}
	if err := weighEvidence(evidence, valids, tests); err != nil {
		return res, err
	}
	for i := range res.Windows {
		res.Windows[i].Evidence = evidence[i]
	}
	gatesRun := gates
	if overlap {
		gatesRun = []string{gateWindow, gateRecord, gateNone}
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
		res.Hindsight = append(res.Hindsight, blRule{Rule: r.Name(), Pooled: p})
	}
	return res, nil
}

// bestOnValidation is walkforward.BestRule: the rule of best validation
// Sharpe among rules on bars valid of ds, the first on a tie, and its
// report (bench, when not nil, must be that range's benchmarks: it is
// checked, and BestRule computes its own).
func bestOnValidation(ds *market.Dataset, valid market.Range, rules []sim.Rule, bench *sim.Benchmarks) (int, sim.Report, error) {
	if bench != nil && !bench.For(ds, valid) {
		return 0, sim.Report{}, fmt.Errorf("best rule: benchmarks given for another range or dataset")
	}
	return walkforward.BestRule(ds, valid, rules)
}

// printBaselines writes res per window and under every gate, then the
// hindsight bound.
func printBaselines(e *env, cfg config.RunConfig, b *prices.Bars, res baselinesResult) {
	w := e.stdout
	fmt.Fprintf(w, "simple rules on %s: %d windows, %d rules (momentum and reversal over lookbacks %s bars, long-short and long-only); validation chooses one per window\n",
		res.Data, len(res.Windows), len(res.Rules), joinInts(res.Lookbacks))
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
	slices.SortStableFunc(hs, func(a, b blRule) int {
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

// wfLayout lays the bar-count windows over bars b, filling in the
// defaults of --test-bars (30 % of the bars after the feature warmup,
// over the windows) and --valid-bars (--test-bars).
func wfLayout(b *prices.Bars, cfg config.RunConfig, k int, testBars, validBars *int, trainBars int) ([]wfWindow, error) {
	usable := b.Len() - market.FeatureWarmup
	if *testBars == 0 {
		*testBars = int(0.3 * float64(usable) / float64(max(k, 1)))
	}
	if *validBars == 0 {
		*validBars = *testBars
	}
	return walkWindows(b.Len(), market.FeatureWarmup, k, *testBars, *validBars, trainBars, cfg.Env.EpisodeBars+2)
}

// joinInts is xs comma-separated.
func joinInts(xs []int) string {
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

// wfWindow is one walk-forward window: bar ranges of the data.
type wfWindow struct {
	Train market.Range `json:"train"`
	Valid market.Range `json:"validation"`
	Test  market.Range `json:"test"`
}

// walkWindows lays k windows over bars [warmup, n): the test ranges are
// the last k·test bars in k consecutive blocks, each preceded by valid
// validation bars, and training takes the train bars before that (every
// earlier bar after the warmup when train is 0: an expanding window). The
// error names the flag to change.
func walkWindows(n, warmup, k, test, valid, train, minTrain int) ([]wfWindow, error) {
	if k < 1 || test < 2 || valid < 2 || train < 0 {
		return nil, fmt.Errorf("%w: --windows %d, --test-bars %d, --valid-bars %d, --train-bars %d: need at least 1 window, 2 test and 2 validation bars, and no negative count",
			errUsage, k, test, valid, train)
	}
	ws := make([]wfWindow, k)
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
				errUsage, i+1, k, tr, max(tr.Len(), 0), minTrain)
		}
		ws[i] = wfWindow{Train: tr, Valid: va, Test: te}
	}
	return ws, nil
}

// windowConfig is cfg with the data ranges of w given by bar times.
func windowConfig(cfg config.RunConfig, b *prices.Bars, w wfWindow) config.RunConfig {
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
	gateWindow = "window"
	gatePooled = "pooled"
	gateRecord = "record"
	gateNone   = "none"
)

// gates lists the gates in the order the summary shows them.
var gates = []string{gateWindow, gatePooled, gateRecord, gateNone}

// wfGateResult is what one gate made of a walk-forward's windows.
type wfGateResult struct {
	Gate   string     `json:"gate"`
	Traded []bool     `json:"traded"` // per window
	Pooled sim.Report `json:"pooled"` // the test ranges as the gate traded them, joined
}

type wfResult struct {
	Window    int      `json:"window"`
	Ranges    wfWindow `json:"ranges"`
	BestEpoch int      `json:"best_epoch"`
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
func weighEvidence(ws []wfResult, valids, ckTests []sim.Report) error {
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
func (w wfResult) trades(cfg config.BacktestConfig, gate string) bool {
	switch gate {
	case gatePooled:
		return !cfg.NoEdge(w.PooledValidT)
	case gateRecord:
		return w.Window > 1 && !cfg.NoEdge(w.RecordT)
	case gateNone:
		return true
	default:
		return !cfg.NoEdge(w.ValidT)
	}
}

// applyGate returns gate's verdicts on ws and the test ranges as it
// traded them (the checkpoint's test backtest where it trades, flats[i]
// where not), joined.
func applyGate(cfg config.BacktestConfig, gate string, ws []wfResult, flats []sim.Report) (wfGateResult, error) {
	g := wfGateResult{Gate: gate, Traded: make([]bool, len(ws))}
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

// barsSpan is "first .. last" bar time of r.
func barsSpan(b *prices.Bars, r market.Range) string {
	if r.Len() <= 0 {
		return "-"
	}
	return b.Time[r.From].Format("2006-01-02 15:04") + " .. " + b.Time[r.To-1].Format("2006-01-02 15:04")
}

// yesNo is "yes" or "no".
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
