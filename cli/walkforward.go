package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

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

// walkForwardResult is what "dqnflow walkforward --json" prints.
type walkForwardResult struct {
	Data    string           `json:"data"`
	Config  config.RunConfig `json:"config"`
	Windows []wfResult       `json:"windows"`
	// Pooled joins the test ranges of every window (market.Pool).
	Pooled market.Report `json:"pooled"`
}

type wfResult struct {
	Window    int           `json:"window"`
	Ranges    wfWindow      `json:"ranges"`
	BestEpoch int           `json:"best_epoch"`
	Test      market.Report `json:"test"`
}

// runWalkForward implements "dqnflow walkforward": it trains one run per
// window (validation picks its checkpoint and stops it early; its test
// range is touched only by its report), then prints each window's test
// metrics and the pooled ones beside buy-and-hold and flat.
func runWalkForward(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "walkforward")
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	epochs := fs.Int("epochs", 0, "epochs per window (default: the config's epochs)")
	device := fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	k := fs.Int("windows", 4, "number of consecutive windows")
	testBars := fs.Int("test-bars", 0, "test bars per window (default: 30% of the bars after the feature warmup, split over the windows)")
	validBars := fs.Int("valid-bars", 0, "validation bars per window (default: --test-bars)")
	trainBars := fs.Int("train-bars", 0, "training bars per window (default 0: every earlier bar, an expanding window)")
	out := fs.String("out", "", "directory for each window's run and the summary (default: runs/<id>)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := loadConfig(fs, *cfgPath, *device, *dataPath, *epochs)
	if err != nil {
		return err
	}
	b, err := market.Load(cfg)
	if err != nil {
		return err
	}
	usable := b.Len() - market.FeatureWarmup
	if *testBars == 0 {
		*testBars = int(0.3 * float64(usable) / float64(max(*k, 1)))
	}
	if *validBars == 0 {
		*validBars = *testBars
	}
	ws, err := walkWindows(b.Len(), market.FeatureWarmup, *k, *testBars, *validBars, *trainBars, cfg.Env.EpisodeBars+2)
	if err != nil {
		return err
	}
	id := newRunID("walkforward")
	if *out == "" {
		*out = filepath.Join("runs", id)
	}
	res := walkForwardResult{Data: cfg.Data.Path, Config: cfg}
	var tests []market.Report
	for i, w := range ws {
		wc := windowConfig(cfg, b, w)
		fmt.Fprintf(e.stderr, "window %d/%d: train %s, validation %s, test %s\n", i+1, len(ws),
			barsSpan(b, w.Train), barsSpan(b, w.Valid), barsSpan(b, w.Test))
		r, err := trainLocal(ctx, e, wc, filepath.Join(*out, fmt.Sprintf("window-%d", i+1)), fmt.Sprintf("%s-w%d", id, i+1))
		if err != nil {
			return fmt.Errorf("window %d: %w", i+1, err)
		}
		if r.Test == nil {
			return fmt.Errorf("window %d: no test report", i+1)
		}
		res.Windows = append(res.Windows, wfResult{Window: i + 1, Ranges: w, BestEpoch: r.BestEpoch, Test: *r.Test})
		tests = append(tests, *r.Test)
	}
	if res.Pooled, err = market.Pool(tests); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(*out, "walkforward.json"), res); err != nil {
		return err
	}
	if *jsonOut {
		return printJSON(e, res)
	}
	w := e.stdout
	fmt.Fprintf(w, "walk-forward on %s: %d windows, test ranges only\n", cfg.Data.Path, len(ws))
	fmt.Fprintf(w, "%-8s %-35s %10s %10s %10s %10s %10s %10s\n", "window", "test range", "return", "Sharpe", "max DD", "B&H ret", "B&H Sharpe", "B&H DD")
	for _, x := range res.Windows {
		t := x.Test
		fmt.Fprintf(w, "%-8d %-35s %9.2f%% %10.3f %9.2f%% %9.2f%% %10.3f %9.2f%%\n", x.Window, barsSpan(b, x.Ranges.Test),
			100*t.TotalReturn, t.Sharpe, 100*t.MaxDrawdown, 100*t.BuyAndHold.TotalReturn, t.BuyAndHold.Sharpe, 100*t.BuyAndHold.MaxDrawdown)
	}
	fmt.Fprintln(w, "pooled:")
	printReport(e, res.Pooled)
	return nil
}

// barsSpan is "first .. last" bar time of r.
func barsSpan(b *market.Bars, r market.Range) string {
	if r.Len() <= 0 {
		return "-"
	}
	return b.Time[r.From].Format("2006-01-02 15:04") + " .. " + b.Time[r.To-1].Format("2006-01-02 15:04")
}
