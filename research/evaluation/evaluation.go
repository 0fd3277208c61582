// Package evaluation judges trained agents on held-out data: for
// "dqnflow evaluate" the series it runs on by default, the runs trained
// on each (at several seeds, and their ensemble), the simple rule each
// validation range chooses (the yardstick), a checkpoint's backtest of
// its config's test range, the report files and the evaluation's record
// and text; for "dqnflow backtest", predict and report a checkpoint's
// policy on a data file (OpenPolicyData), a panel checkpoint's backtest
// on its panel, the Q values per bar, the validation backtests of a
// run's checkpoints, and the recommendation the checkpoint's run recorded.
package evaluation

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/internal/usage"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/research/baselines"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// SeriesNames are the series `dqnflow evaluate` reports on by default:
// every bundled file and the synthetic series.
func SeriesNames() []string {
	var out []string
	for _, n := range data.Names() {
		out = append(out, data.Prefix+n)
	}
	return append(out, prices.SyntheticPath)
}

// Evaluation is what "dqnflow evaluate --json" prints and evaluate.json holds.
type Evaluation struct {
	Date       string           `json:"date"`
	Checkpoint string           `json:"checkpoint,omitempty"`
	Config     config.RunConfig `json:"config"`
	// Recommendation is what the run that chose --checkpoint recorded in
	// it (absent: nothing), and Notice flatNotice's sentence when that was
	// to stay flat: the series below trade it anyway.
	Recommendation *checkpoint.Recommendation `json:"run_recommendation,omitempty"`
	Notice         string                     `json:"notice,omitempty"`
	Series         []Series                   `json:"series"`
	// Portfolio, for a checkpoint of a panel run evaluated on its own
	// panel, is the equal-risk portfolio of Series' test reports
	// (sim.PanelPortfolio; Sharpe of daily returns, with its
	// t-statistic).
	Portfolio *Portfolio `json:"panel_portfolio,omitempty"`
}

// Portfolio is a panel checkpoint's equal-risk portfolio on its
// series' test ranges.
type Portfolio struct {
	Series  []string   `json:"series"`
	Sharpe  float64    `json:"sharpe"`
	SharpeT float64    `json:"sharpe_t"`
	Test    sim.Report `json:"test"`
}

type Series struct {
	Data      string     `json:"data"`
	BestEpoch int        `json:"best_epoch,omitempty"`
	Epochs    int        `json:"epochs,omitempty"`
	Test      sim.Report `json:"test"`
	Equity    string     `json:"equity_png"`
	Drawdown  string     `json:"drawdown_png"`
	// Seeds holds every seed's run with --seeds N > 1 (the first is the
	// run above), and Summary what they say together.
	Seeds    []report.SeedRow    `json:"seeds,omitempty"`
	Summary  *report.SeedSummary `json:"seed_summary,omitempty"`
	Ensemble *report.EnsembleRow `json:"ensemble,omitempty"`
	// Rule is the yardstick: the simple rule (dqnflow baselines, default
	// lookbacks) that the same validation range chooses, on the same test
	// range.
	Rule Rule `json:"rule"`
}

// Rule is the rule a split's validation range chooses and its test
// report.
type Rule struct {
	Name        string     `json:"name"`
	ValidSharpe float64    `json:"validation_sharpe"`
	ValidT      float64    `json:"validation_sharpe_t"`
	Test        sim.Report `json:"test"`
}

// ChooseRule backtests the rules of the default lookbacks on cfg's
// validation range, takes the one of best Sharpe (the first on a tie) and
// backtests it on the test range; src reads the data.
func ChooseRule(ctx context.Context, src prices.Source, cfg config.RunConfig) (Rule, error) {
	ds, err := market.Prepare(ctx, src, cfg)
	if err != nil {
		return Rule{}, err
	}
	if ds.Test.Len() < 2 {
		return Rule{}, fmt.Errorf("no test range")
	}
	rules := sim.Rules(sim.DefaultLookbacks)
	i, v, err := baselines.BestOnValidation(ds, ds.Valid, rules, nil)
	if err != nil {
		return Rule{}, err
	}
	best := Rule{Name: rules[i].Name(), ValidSharpe: v.Sharpe, ValidT: v.SharpeT()}
	if best.Test, err = sim.Backtest(ds, ds.Test, rules[i].Policy(ds.Bars)); err != nil {
		return Rule{}, fmt.Errorf("%s: %w", best.Name, err)
	}
	return best, nil
}

// Checkpoint runs ck's policy on the test range that cfg's split
// gives on cfg.Data.Path (read from src), priced as
// trainer.CheckpointDataset says.
func Checkpoint(ctx context.Context, src prices.Source, ck *checkpoint.Checkpoint, cfg config.RunConfig) (sim.Report, error) {
	split, err := market.Prepare(ctx, src, cfg)
	if err != nil {
		return sim.Report{}, err
	}
	if split.Test.Len() < 2 {
		return sim.Report{}, fmt.Errorf("%w: the checkpoint's config holds out no test range (data.test_fraction 0); evaluate a run trained with one", usage.Err)
	}
	pol, err := policy.Load(ck)
	if err != nil {
		return sim.Report{}, err
	}
	_, ds, err := trainer.CheckpointDataset(ctx, src, ck, cfg.Data.Path, nil)
	if err != nil {
		return sim.Report{}, err
	}
	return pol.Backtest(ds, split.Test)
}

// SeriesSlug is a file-name-safe name of a data path.
func SeriesSlug(path string) string {
	s := strings.TrimPrefix(filepath.Base(strings.TrimPrefix(path, data.Prefix)), data.Prefix)
	s = strings.TrimSuffix(s, filepath.Ext(s))
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	return b.String()
}

// Print writes ev as text, each test report as report.PrintBacktest.
func Print(w io.Writer, ev Evaluation) {
	if ev.Notice != "" {
		fmt.Fprintln(w, ev.Notice)
	}
	for _, s := range ev.Series {
		fmt.Fprintf(w, "%s:\n", s.Data)
		report.PrintBacktest(w, s.Test)
		fmt.Fprintf(w, "  yardstick: the simple rule this validation range chooses, %s, has test Sharpe %.3f (return %.2f%%, max drawdown %.2f%%)\n",
			s.Rule.Name, s.Rule.Test.Sharpe, 100*s.Rule.Test.TotalReturn, 100*s.Rule.Test.MaxDrawdown)
		if m := s.Summary; m != nil {
			fmt.Fprintf(w, "  %d seeds: %d abstained; the chosen checkpoints' test Sharpe is above zero in %d, above buy-and-hold's in %d; mean %.3f, sd %.3f\n",
				m.Runs, m.Abstained, m.AboveZero, m.AboveBuyHold, m.Mean, m.SD)
		}
		if en := s.Ensemble; en != nil {
			fmt.Fprintf(w, "  their ensemble: validation Sharpe %.3f (t = %.2f, abstained %v), test Sharpe %.3f (its own backtest %.3f, %d trades)\n",
				en.Valid.Sharpe, en.ValidT, en.Abstained, en.Test.Sharpe, en.Own.Sharpe, en.Own.Trades)
		}
	}
	if p := ev.Portfolio; p != nil {
		fmt.Fprintf(w, "equal-risk portfolio of the panel's %d series on their test ranges (daily returns): Sharpe %.3f (t = %.2f), return %.2f%%, max drawdown %.2f%%\n",
			len(p.Series), p.Sharpe, p.SharpeT, 100*p.Test.TotalReturn, 100*p.Test.MaxDrawdown)
	}
}
