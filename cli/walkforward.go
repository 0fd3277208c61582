package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

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
func windowConfig(cfg config.RunConfig, b *market.Bars, w wfWindow) config.RunConfig {
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

// The evidence that lets a walk-forward window trade its test range
// (--gate), each judged at backtest.min_valid_t:
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

// walkForwardResult is what "dqnflow walkforward --json" prints.
type walkForwardResult struct {
	Data    string           `json:"data"`
	Config  config.RunConfig `json:"config"`
	Gate    string           `json:"gate"`
	Windows []wfResult       `json:"windows"`
	// Pooled joins the test ranges of every window (market.Pool) as Gate
	// traded them.
	Pooled market.Report `json:"pooled"`
	// Gates is every gate's verdicts and pooled test range, on the same
	// runs, for comparison; Gate's is the result above.
	Gates []wfGateResult `json:"gates"`
	// Rules is the yardstick on the same windows: the simple rules of
	// `dqnflow baselines` (default lookbacks), one chosen per window on
	// its validation range as the checkpoint is, under every gate.
	Rules baselinesResult `json:"rules"`
}

// wfGateResult is what one gate made of a walk-forward's windows.
type wfGateResult struct {
	Gate   string        `json:"gate"`
	Traded []bool        `json:"traded"` // per window
	Pooled market.Report `json:"pooled"` // the test ranges as the gate traded them, joined
}

type wfResult struct {
	Window    int      `json:"window"`
	Ranges    wfWindow `json:"ranges"`
	BestEpoch int      `json:"best_epoch"`
	// ValidSharpe and ValidT are the chosen checkpoint's on the window's
	// own validation range; PooledValidSharpe and PooledValidT are those
	// of windows 1 … this one's validation backtests joined (market.Pool),
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
	Traded         bool          `json:"traded"`
	Test           market.Report `json:"test"`
	CheckpointTest market.Report `json:"checkpoint_test"`
}

// weighEvidence fills the evidence fields of ws from each window's
// chosen checkpoint's validation and test backtests, in the windows'
// order.
func weighEvidence(ws []wfResult, valids, ckTests []market.Report) error {
	for i := range ws {
		w := &ws[i]
		w.ValidSharpe, w.ValidT = valids[i].Sharpe, valids[i].SharpeT()
		pooled, err := market.Pool(valids[:i+1])
		if err != nil {
			return fmt.Errorf("window %d: pool validation: %w", i+1, err)
		}
		w.PooledValidSharpe, w.PooledValidT = pooled.Sharpe, pooled.SharpeT()
		w.RecordSharpe, w.RecordT = 0, 0
		if i > 0 {
			record, err := market.Pool(ckTests[:i])
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
func applyGate(cfg config.BacktestConfig, gate string, ws []wfResult, flats []market.Report) (wfGateResult, error) {
	g := wfGateResult{Gate: gate, Traded: make([]bool, len(ws))}
	tests := make([]market.Report, len(ws))
	for i, w := range ws {
		g.Traded[i], tests[i] = w.trades(cfg, gate), flats[i]
		if g.Traded[i] {
			tests[i] = w.CheckpointTest
		}
	}
	var err error
	if g.Pooled, err = market.Pool(tests); err != nil {
		return g, fmt.Errorf("gate %s: %w", gate, err)
	}
	return g, nil
}

// walkForwardCmd is "dqnflow walkforward": it trains one run per
// window (validation picks its checkpoint and stops it early; its test
// range is touched only by its report), then prints each window's test
// metrics and the pooled ones beside buy-and-hold and flat. A window
// trades its checkpoint on its test range where --gate's evidence reaches
// backtest.min_valid_t, and is flat otherwise.
func walkForwardCmd(e *env) *cobra.Command {
	cmd := leaf("walkforward",
		"walk-forward: one run per window, test metrics per window and pooled",
		"walkforward trains one run per window over consecutive test ranges, each on the bars before it, and reports every window's test range and all of them joined, under each gate (the evidence that lets a window trade).",
		"dqnflow walkforward --data bundled:bitcoin_2024.csv --windows 3 --epochs 10 --out runs/wf",
		"dqnflow walkforward --config my.json --windows 4 --train-bars 20000 --json",
		"dqnflow walkforward --data bundled:USA500IDXUSD_H1.csv --windows 4 --gate window")
	fs := cmd.Flags()
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	epochs := fs.Int("epochs", 0, "epochs per window (default: the config's epochs)")
	device := fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	flagValues(fs, "device", deviceValues...)
	k := fs.Int("windows", 4, "number of consecutive windows")
	testBars := fs.Int("test-bars", 0, "test bars per window (default: 30% of the bars after the feature warmup, split over the windows)")
	validBars := fs.Int("valid-bars", 0, "validation bars per window (default: --test-bars)")
	trainBars := fs.Int("train-bars", 0, "training bars per window (default 0: every earlier bar, an expanding window)")
	gate := fs.String("gate", gateRecord, "evidence that lets a window trade its test range, at backtest.min_valid_t: window (its run's own validation), pooled (the validation ranges of that window and every earlier one, joined), record (every earlier window's test range, joined) or none (always); the summary shows them all")
	flagValues(fs, "gate", gates...)
	out := fs.String("out", "", "directory for each window's run and the summary (default: runs/<id>)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		src, err := df.source(*dataPath)
		if err != nil {
			return err
		}
		if !slices.Contains(gates, *gate) {
			return fmt.Errorf("%w: --gate %q: want one of %s", errUsage, *gate, strings.Join(gates, ", "))
		}
		cfg, err := loadConfig(fs, *cfgPath, *device, *dataPath, *epochs)
		if err != nil {
			return err
		}
		b, err := src.Load(ctx, cfg)
		if err != nil {
			return err
		}
		ws, err := wfLayout(b, cfg, *k, testBars, validBars, *trainBars)
		if err != nil {
			return err
		}
		gatesRun := gates
		if *validBars > *testBars {
			// The windows' validation ranges overlap: joined, they would count
			// bars twice.
			if *gate == gatePooled {
				return fmt.Errorf("%w: --gate pooled with --valid-bars %d above --test-bars %d: the windows' validation ranges would overlap and count bars twice",
					errUsage, *validBars, *testBars)
			}
			gatesRun = []string{gateWindow, gateRecord, gateNone}
		}
		id := newRunID("walkforward")
		if *out == "" {
			*out = filepath.Join("runs", id)
		}
		res := walkForwardResult{Data: cfg.Data.Path, Config: cfg, Gate: *gate}
		var valids, ckTests, flats []market.Report
		for i, w := range ws {
			wc := windowConfig(cfg, b, w)
			fmt.Fprintf(e.stderr, "window %d/%d: train %s, validation %s, test %s\n", i+1, len(ws),
				barsSpan(b, w.Train), barsSpan(b, w.Valid), barsSpan(b, w.Test))
			r, err := trainLocal(ctx, e, src, wc, filepath.Join(*out, fmt.Sprintf("window-%d", i+1)), fmt.Sprintf("%s-w%d", id, i+1))
			if err != nil {
				return fmt.Errorf("window %d: %w", i+1, err)
			}
			if r.CheckpointTest == nil || r.FlatTest == nil {
				return fmt.Errorf("window %d: no test report", i+1)
			}
			res.Windows = append(res.Windows, wfResult{Window: i + 1, Ranges: w, BestEpoch: r.BestEpoch, CheckpointTest: *r.CheckpointTest})
			valids, ckTests, flats = append(valids, r.Valid), append(ckTests, *r.CheckpointTest), append(flats, *r.FlatTest)
		}
		if err := weighEvidence(res.Windows, valids, ckTests); err != nil {
			return err
		}
		for _, g := range gatesRun {
			gr, err := applyGate(cfg.Backtest, g, res.Windows, flats)
			if err != nil {
				return err
			}
			res.Gates = append(res.Gates, gr)
			if g != *gate {
				continue
			}
			res.Pooled = gr.Pooled
			for i := range res.Windows {
				w := &res.Windows[i]
				w.Traded, w.Test = gr.Traded[i], flats[i]
				if w.Traded {
					w.Test = w.CheckpointTest
				}
			}
		}
		if res.Rules, err = ruleBaselines(ctx, src, cfg, b, ws, market.DefaultLookbacks, *validBars > *testBars); err != nil {
			return fmt.Errorf("the rules' yardstick: %w", err)
		}
		if err := writeJSONFile(filepath.Join(*out, "walkforward.json"), res); err != nil {
			return err
		}
		if *jsonOut {
			return printJSON(e, res)
		}
		w := e.stdout
		fmt.Fprintf(w, "walk-forward on %s: %d windows, test ranges only; a window trades where the %s gate's evidence has t >= %g (--gate), else it is flat\n",
			cfg.Data.Path, len(ws), *gate, cfg.Backtest.MinValidT)
		fmt.Fprintf(w, "%-7s %-35s %14s %14s %14s %7s %10s %10s %10s %10s %10s %10s\n", "window", "test range", "valid S (t)", "pooled S (t)", "record S (t)", "trades",
			"return", "Sharpe", "max DD", "B&H ret", "B&H Sharpe", "B&H DD")
		st := func(s, t float64) string { return fmt.Sprintf("%.2f (%.2f)", s, t) }
		for _, x := range res.Windows {
			t := x.Test
			fmt.Fprintf(w, "%-7d %-35s %14s %14s %14s %7s %9.2f%% %10.3f %9.2f%% %9.2f%% %10.3f %9.2f%%\n", x.Window, barsSpan(b, x.Ranges.Test),
				st(x.ValidSharpe, x.ValidT), st(x.PooledValidSharpe, x.PooledValidT), st(x.RecordSharpe, x.RecordT), yesNo(x.Traded),
				100*t.TotalReturn, t.Sharpe, 100*t.MaxDrawdown, 100*t.BuyAndHold.TotalReturn, t.BuyAndHold.Sharpe, 100*t.BuyAndHold.MaxDrawdown)
		}
		fmt.Fprintln(w, "every gate on the same runs (test ranges joined):")
		for _, g := range res.Gates {
			n := 0
			for _, tr := range g.Traded {
				if tr {
					n++
				}
			}
			fmt.Fprintf(w, "  %-7s traded %d of %d windows: Sharpe %.3f, return %.2f%%, max drawdown %.2f%%, trades %d\n",
				g.Gate, n, len(g.Traded), g.Pooled.Sharpe, 100*g.Pooled.TotalReturn, 100*g.Pooled.MaxDrawdown, g.Pooled.Trades)
		}
		for _, g := range res.Rules.Gates {
			if g.Gate == gateNone || g.Gate == *gate {
				fmt.Fprintf(w, "  yardstick, gate %-7s simple rules chosen on each validation range as the checkpoint is (dqnflow baselines): Sharpe %.3f, return %.2f%%, max drawdown %.2f%%\n",
					g.Gate+":", g.Pooled.Sharpe, 100*g.Pooled.TotalReturn, 100*g.Pooled.MaxDrawdown)
			}
		}
		fmt.Fprintf(w, "pooled, gate %s:\n", *gate)
		printReport(e, res.Pooled)
		return nil
	}
	return cmd
}

// barsSpan is "first .. last" bar time of r.
func barsSpan(b *market.Bars, r market.Range) string {
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
