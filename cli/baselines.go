package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// baselinesResult is what "dqnflow baselines --json" prints: on
// walkforward's windows, the simple rules (market.Rules) a trader would
// try before an agent.
type baselinesResult struct {
	Data string `json:"data"`
	// Lookbacks and Rules are the family searched, in order.
	Lookbacks []int    `json:"lookbacks"`
	Rules     []string `json:"rules"`
	// Windows is, per window, the rule its validation range chose and its
	// test report; Gates the record of that choice under every gate of
	// walkforward, as its summary shows it.
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
	Chosen   string        `json:"chosen"`
	Evidence wfResult      `json:"evidence"`
	Test     market.Report `json:"test"`
}

type blRule struct {
	Rule   string        `json:"rule"`
	Pooled market.Report `json:"pooled_test"`
}

// baselinesCmd is "dqnflow baselines": on the windows walkforward
// would lay over the data (same flags, same defaults), it backtests every
// rule of the family on each window's validation and test ranges with the
// data's instrument and costs, lets validation choose one rule per window,
// and reports that choice's test ranges per window and joined, under
// every gate of walkforward (the chosen rule stands in for the window's
// checkpoint). No training: it takes seconds. What it measures is how
// much a simple rule, chosen as the agent's checkpoint is chosen, earns
// on the same test ranges; the agent should beat it before it trades.
func baselinesCmd(e *env) *cobra.Command {
	cmd := leaf("baselines",
		"simple rules on walkforward's windows, no training",
		"baselines runs momentum and reversal rules on walkforward's windows, each chosen on the window's validation range, and reports their test metrics per window and joined: the yardstick of the agent.",
		"dqnflow baselines --data bundled:USA500IDXUSD_H1.csv            # walkforward's four windows, momentum and reversal chosen on validation",
		"dqnflow baselines --data bundled:bitcoin_2024.csv --lookbacks 6,24,120 --json")
	fs := cmd.Flags()
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults); its data and env sections apply")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	k := fs.Int("windows", 4, "number of consecutive windows (as walkforward)")
	testBars := fs.Int("test-bars", 0, "test bars per window (default: 30% of the bars after the feature warmup, split over the windows)")
	validBars := fs.Int("valid-bars", 0, "validation bars per window (default: --test-bars)")
	trainBars := fs.Int("train-bars", 0, "training bars per window (default 0: every earlier bar); rules do not train, but the instrument's point value comes from the last training bar, as in walkforward")
	lookbacks := fs.String("lookbacks", joinInts(market.DefaultLookbacks), "lookbacks of the rules, in bars, comma-separated")
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
		b, err := src.Load(ctx, cfg)
		if err != nil {
			return err
		}
		lbs, err := market.ParseLookbacks(*lookbacks, b.Len())
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
// b (walkforward's), lets each window's validation range choose one, and
// judges the choices under every gate (without pooled where overlap says
// the validation ranges overlap), as "dqnflow baselines" reports them. Each
// window's dataset is prepared from src.
func ruleBaselines(ctx context.Context, src market.Source, cfg config.RunConfig, b *market.Bars, ws []wfWindow, lbs []int, overlap bool) (baselinesResult, error) {
	rules := market.Rules(lbs)
	res := baselinesResult{Data: cfg.Data.Path, Lookbacks: lbs}
	for _, r := range rules {
		res.Rules = append(res.Rules, r.Name())
	}
	evidence := make([]wfResult, len(ws))
	var valids, tests, flats []market.Report
	perRule := make([][]market.Report, len(rules)) // test reports by rule, then window
	for i, w := range ws {
		ds, err := src.Prepare(ctx, windowConfig(cfg, b, w))
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		validB, err := market.NewBenchmarks(ds, w.Valid)
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		testB, err := market.NewBenchmarks(ds, w.Test)
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		best, bestValid, err := bestOnValidation(ds, w.Valid, rules, validB)
		if err != nil {
			return res, fmt.Errorf("window %d: %w", i+1, err)
		}
		for j, r := range rules {
			t, err := market.BacktestWith(ds, w.Test, r.Policy(b), testB)
			if err != nil {
				return res, fmt.Errorf("window %d, %s: %w", i+1, r.Name(), err)
			}
			perRule[j] = append(perRule[j], t)
		}
		flat, err := market.BacktestWith(ds, w.Test, flatPolicy{}, testB)
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
		p, err := market.Pool(perRule[j])
		if err != nil {
			return res, fmt.Errorf("%s: %w", r.Name(), err)
		}
		res.Hindsight = append(res.Hindsight, blRule{Rule: r.Name(), Pooled: p})
	}
	return res, nil
}

// bestOnValidation backtests rules on bars valid of ds (with its
// benchmarks bench, nil: computed) and returns the index of the one of
// best Sharpe, the first on a tie, and its report: the choice the
// yardstick makes wherever it stands beside a checkpoint (baselines,
// walkforward, evaluate).
func bestOnValidation(ds *market.Dataset, valid market.Range, rules []market.Rule, bench *market.Benchmarks) (int, market.Report, error) {
	best := -1
	var rep market.Report
	for j, r := range rules {
		v, err := market.BacktestWith(ds, valid, r.Policy(ds.Bars), bench)
		if err != nil {
			return 0, rep, fmt.Errorf("%s: %w", r.Name(), err)
		}
		if best < 0 || v.Sharpe > rep.Sharpe {
			best, rep = j, v
		}
	}
	if best < 0 {
		return 0, rep, fmt.Errorf("no rules")
	}
	return best, rep, nil
}

// printBaselines writes res as walkforward's summary does, then the
// hindsight bound.
func printBaselines(e *env, cfg config.RunConfig, b *market.Bars, res baselinesResult) {
	w := e.stdout
	fmt.Fprintf(w, "simple rules on %s: %d windows (walkforward's), %d rules (momentum and reversal over lookbacks %s bars, long-short and long-only); validation chooses one per window\n",
		res.Data, len(res.Windows), len(res.Rules), joinInts(res.Lookbacks))
	fmt.Fprintf(w, "%-7s %-35s %-24s %14s %14s %7s %10s %10s %10s %10s %10s\n", "window", "test range", "chosen rule", "valid S (t)", "record S (t)",
		"trades", "return", "Sharpe", "max DD", "B&H Sharpe", "B&H DD")
	for _, x := range res.Windows {
		t, ev := x.Test, x.Evidence
		fmt.Fprintf(w, "%-7d %-35s %-24s %14s %14s %7d %9.2f%% %10.3f %9.2f%% %10.3f %9.2f%%\n", x.Window, barsSpan(b, x.Ranges.Test), x.Chosen,
			fmt.Sprintf("%.2f (%.2f)", ev.ValidSharpe, ev.ValidT), fmt.Sprintf("%.2f (%.2f)", ev.RecordSharpe, ev.RecordT),
			t.Trades, 100*t.TotalReturn, t.Sharpe, 100*t.MaxDrawdown, t.BuyAndHold.Sharpe, 100*t.BuyAndHold.MaxDrawdown)
	}
	fmt.Fprintf(w, "the chosen rules under every gate of walkforward (test ranges joined; a window trades where the gate's evidence has t >= %g):\n", cfg.Backtest.MinValidT)
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

// wfLayout lays walkforward's windows over bars b, filling in the
// defaults of --test-bars (30 % of the bars after the feature warmup,
// over the windows) and --valid-bars (--test-bars).
func wfLayout(b *market.Bars, cfg config.RunConfig, k int, testBars, validBars *int, trainBars int) ([]wfWindow, error) {
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
