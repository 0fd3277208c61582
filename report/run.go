package report

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
)

// Run is what a run's report shows: the store's rows and, when the best
// checkpoint's file could be read, its greedy backtest.
type Run struct {
	Run         metadata.Run
	Epochs      []metadata.Epoch
	Checkpoints []metadata.CheckpointRecord
	Backtests   []metadata.BacktestRecord
	// MeanQ is, per checkpoint still on disk, the mean over the validation
	// bars of the expected Q value of the greedy action (averaged over the
	// three branches); retention decides which epochs have one.
	MeanQ []EpochValue
	// Best is the best checkpoint's backtest on the validation range; nil
	// when the run has no best checkpoint or its file is out of reach
	// (BestNote says why).
	Best     *Backtest
	BestNote string
}

// EpochValue is one number of one epoch.
type EpochValue struct {
	Epoch int
	Value float64
}

// Backtest is a greedy backtest with its path: equity, the benchmark's
// equity and the action taken at each bar.
type Backtest struct {
	Epoch int
	URI   string
	// Times[i] is the time of bar i of the range; Equity[i] and
	// BuyAndHold[i] are the equities at its close.
	Times      []time.Time
	Equity     []float64
	BuyAndHold []float64
	// Actions[i] is the action chosen at bar i (filled at bar i+1's open);
	// the last bar has none.
	Actions []market.Action
	Report  sim.Report
	// Notice, when not "", is said before the figures: the checkpoint's
	// own run recommended staying flat (ADR 0016), and the figures trade
	// it anyway.
	Notice string
}

// Figure is one PNG of a report.
type Figure struct {
	Name  string // file name, e.g. "loss.png"
	Title string
	PNG   []byte
	Note  string // what it shows, under the figure
}

// DataURI is the PNG inlined, for a page that needs no other file.
func (f Figure) DataURI() template.URL {
	return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(f.PNG))
}

// RunFigures draws the plots of a run's report.
func RunFigures(r Run) ([]Figure, error) {
	var figs []Figure
	add := func(name, title, note string, png []byte, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if png != nil {
			figs = append(figs, Figure{Name: name, Title: title, PNG: png, Note: note})
		}
		return nil
	}
	perEpoch := func(f func(metadata.Epoch) (float64, bool)) plotter.XYs {
		var xy plotter.XYs
		for _, e := range r.Epochs {
			if v, ok := f(e); ok {
				xy = append(xy, plotter.XY{X: float64(e.Epoch), Y: v})
			}
		}
		return xy
	}
	metric := func(key string) func(metadata.Epoch) (float64, bool) {
		return func(e metadata.Epoch) (float64, bool) { v, ok := e.Metrics[key]; return v, ok }
	}
	loss, err := linePlot("Training loss", "epoch", "cross-entropy", false,
		series{"loss", perEpoch(func(e metadata.Epoch) (float64, bool) { return e.Loss, true })})
	if err := add("loss.png", "Training loss per epoch", "Mean C51 cross-entropy over the epoch's gradient steps.", loss, err); err != nil {
		return nil, err
	}
	var q plotter.XYs
	for _, v := range r.MeanQ {
		q = append(q, plotter.XY{X: float64(v.Epoch), Y: v.Value})
	}
	meanQ, err := linePlot("Mean Q", "epoch", "expected return", false,
		series{"training batch (actions taken)", perEpoch(metric("mean_q"))},
		series{"validation (greedy actions, checkpoints kept)", q})
	if err := add("mean_q.png", "Mean Q per epoch",
		"Expected Q of the actions taken in each epoch's last training batch (as the backend reports it), and of the greedy actions over the validation bars for each checkpoint retention kept.",
		meanQ, err); err != nil {
		return nil, err
	}
	grad, err := linePlot("Gradient norm", "epoch", "global L2 norm (before clipping)", false,
		series{"mean over the epoch", perEpoch(func(e metadata.Epoch) (float64, bool) { return e.GradNorm, true })},
		series{"largest step of the epoch", perEpoch(metric("grad_norm_max"))})
	if err := add("grad_norm.png", "Gradient norm per epoch", "Global gradient norm before clipping: the epoch's mean and (where the backend reports it) its largest step.", grad, err); err != nil {
		return nil, err
	}
	stag, err := linePlot("Stagnation", "epoch", "share of updates", false, series{"stagnation", perEpoch(metric("stagnation"))})
	if err := add("stagnation.png", "Stagnation per epoch",
		"Share of the epoch's parameter updates that the rounding of the stored parameter absorbed (docs/precision.md): near 0 with float32 masters, the figure to watch in precision bf16.",
		stag, err); err != nil {
		return nil, err
	}
	eps, err := linePlot("Exploration rate", "epoch", "ε", false, series{"ε", perEpoch(metric("epsilon"))})
	if err := add("epsilon.png", "ε per epoch", "Exploration rate at the end of each epoch's collection.", eps, err); err != nil {
		return nil, err
	}
	sharpe, err := linePlot("Validation Sharpe", "epoch", "annualised Sharpe ratio", false,
		series{"validation Sharpe", perEpoch(func(e metadata.Epoch) (float64, bool) {
			if e.ValidSharpe == nil {
				return 0, false
			}
			return *e.ValidSharpe, true
		})})
	if err := add("valid_sharpe.png", "Validation Sharpe per epoch", "Greedy backtest of each epoch's weights on the validation range.", sharpe, err); err != nil {
		return nil, err
	}
	if r.Best == nil {
		return figs, nil
	}
	b := r.Best
	var eq, bh, dd, bhdd plotter.XYs
	peak, bhPeak := math.Inf(-1), math.Inf(-1)
	for i, t := range b.Times {
		x := unix(t)
		eq = append(eq, plotter.XY{X: x, Y: b.Equity[i]})
		bh = append(bh, plotter.XY{X: x, Y: b.BuyAndHold[i]})
		peak, bhPeak = math.Max(peak, b.Equity[i]), math.Max(bhPeak, b.BuyAndHold[i])
		dd = append(dd, plotter.XY{X: x, Y: 100 * (b.Equity[i]/peak - 1)})
		bhdd = append(bhdd, plotter.XY{X: x, Y: 100 * (b.BuyAndHold[i]/bhPeak - 1)})
	}
	equity, err := linePlot(fmt.Sprintf("Equity, best checkpoint (epoch %d)", b.Epoch), "", "equity", true,
		series{"agent", eq}, series{"buy and hold", bh})
	if err := add("equity.png", "Equity: best checkpoint against buy-and-hold",
		"Validation range, same costs and fills; buy-and-hold is long the maximum contracts throughout.", equity, err); err != nil {
		return nil, err
	}
	draw, err := linePlot("Drawdown", "", "drawdown from peak, %", true, series{"agent", dd}, series{"buy and hold", bhdd})
	if err := add("drawdown.png", "Drawdown: best checkpoint against buy-and-hold", "Equity below its running peak.", draw, err); err != nil {
		return nil, err
	}
	for _, branch := range []struct {
		file, title string
		names       []string
		pick        func(market.Action) int
	}{
		{"actions_direction.png", "Direction", []string{"short", "flat", "long"}, func(a market.Action) int { return a.Dir }},
		{"actions_size.png", "Size", []string{"1/4", "2/4", "3/4", "4/4"}, func(a market.Action) int { return a.Size }},
		{"actions_exit.png", "Exit rule", []string{"none", "stop 1×ATR", "stop 2×ATR"}, func(a market.Action) int { return a.Exit }},
	} {
		x, shares := actionMix(b, len(branch.names), branch.pick)
		if len(x) < 2 {
			continue
		}
		png, err := stackedPlot("Action mix: "+branch.title, "", x, branch.names, shares)
		if err := add(branch.file, "Action mix over time: "+branch.title,
			"Share of bars in each window on which the best checkpoint's greedy policy chose each action.", png, err); err != nil {
			return nil, err
		}
	}
	return figs, nil
}

// actionMix splits the backtest's bars into about 60 windows and returns
// each window's mid time and the share of each action of one branch.
func actionMix(b *Backtest, n int, pick func(market.Action) int) ([]float64, [][]float64) {
	bars := len(b.Actions)
	windows := min(60, bars/4)
	if windows < 2 {
		return nil, nil
	}
	x := make([]float64, windows)
	shares := make([][]float64, n)
	for k := range shares {
		shares[k] = make([]float64, windows)
	}
	for w := range windows {
		from, to := w*bars/windows, (w+1)*bars/windows
		x[w] = unix(b.Times[(from+to)/2])
		for _, a := range b.Actions[from:to] {
			if k := pick(a); k >= 0 && k < n {
				shares[k][w]++
			}
		}
		for k := range shares {
			shares[k][w] /= float64(to - from)
		}
	}
	return x, shares
}

// WriteRun writes the report of one run into dir: index.html, which
// inlines every plot so that the one file is the whole report, and each
// plot as a PNG beside it. It returns the path of index.html.
func WriteRun(dir string, r Run) (string, error) {
	figs, err := RunFigures(r)
	if err != nil {
		return "", fmt.Errorf("report of run %s: %w", r.Run.RunID, err)
	}
	page := runPage(r, figs)
	return writePage(dir, page, figs)
}

func writePage(dir string, page any, figs []Figure) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	for _, f := range figs {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.PNG, 0o644); err != nil {
			return "", fmt.Errorf("report: %w", err)
		}
	}
	path := filepath.Join(dir, "index.html")
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	if err := pageTemplate.Execute(f, page); err != nil {
		f.Close()
		return "", fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("report: write %s: %w", path, err)
	}
	return path, nil
}

// configJSON indents a stored config for the page.
func configJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
