package summary

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/stats"
	"github.com/dqnflow/dqnflow/walkforward"
)

// Weights of the summary's portfolio across series (SummaryOptions.Weights).
const (
	// WeightsInverseVol weights each series by 1/σ, σ the standard
	// deviation of its buy-and-hold baseline's daily returns over the
	// VolDays days of the study before the day (stats.InverseVolWeights):
	// the instrument's risk at a full position, known the day before.
	// The agent and every baseline trade at most a full position, so each
	// series gets the same risk budget in every strategy's portfolio, and
	// the portfolios of two strategies differ only by their positions.
	WeightsInverseVol = "inverse_vol"
	// WeightsEqual splits capital equally among the series present on a
	// day (stats.EqualRiskPortfolio): right when the returns are already
	// sized to one target volatility.
	WeightsEqual = "equal"
)

// Groups of a Summary: the series the agent trained on, and those left
// out of its training (leave-series-out).
const (
	GroupTraining = "training"
	GroupLeftOut  = "left_out"
)

// Defaults of SummaryOptions' zero fields, and the seeds the study should
// have for its mean over seeds to be judged.
const (
	DefaultVolDays    = 63 // a quarter of trading days
	DefaultVolMinDays = 20 // a month
	AdvisedSeeds      = 8
)

// SummaryOptions says how Summarize measures a study.
type SummaryOptions struct {
	// Trials is the number of agent configurations tried (Output.Trials.
	// Total, which the run's metadata records): the deflated Sharpe
	// ratio's N. At least 1.
	Trials int `json:"trials"`
	// DaysPerYear annualises the daily figures; 0 takes, for a group's
	// portfolio, the largest Result.DaysPerYear of its rows (the union
	// calendar of the series trades at least as often as its busiest
	// series; exact when one series trades on every day any other does)
	// and, for one series, the mean of its rows'.
	DaysPerYear float64 `json:"days_per_year,omitempty"`
	// TrialVar is the variance of the trials' per-day Sharpe ratios for
	// the deflated Sharpe ratio; 0 assumes 1/n, n the portfolio's days:
	// the sampling variance of the Sharpe ratio of a trial without skill
	// (at SR = 0 the Lo/Mertens bracket 1 − γ3·SR + (γ4 − 1)/4·SR² is 1
	// whatever the skewness and kurtosis), the trials taken as
	// independent. Independence overstates the selection when the trials
	// are correlated (DSR too low); trials of truly different skill have
	// a larger variance than 1/n (DSR too high): measure and give it then.
	TrialVar float64 `json:"trial_var,omitempty"`
	// Weights is WeightsInverseVol ("" means it) or WeightsEqual.
	Weights string `json:"weights"`
	// VolDays is the window of the inverse-volatility estimate, and
	// VolMinDays the days of history a series needs before it enters the
	// portfolio (0: DefaultVolDays, DefaultVolMinDays).
	VolDays    int `json:"vol_days,omitempty"`
	VolMinDays int `json:"vol_min_days,omitempty"`
	// Bootstrap draws every interval (its Seed names the stream; its
	// Level is also the Wilson intervals' level).
	Bootstrap stats.Bootstrap `json:"bootstrap"`
}

// Summary is the study's headline statistics: what `dqnflow walkforward`
// writes as summary.json beside results.json.
type Summary struct {
	// Options are those Summarize ran with, defaults filled in.
	Options SummaryOptions `json:"options"`
	// TrialVarRule says what variance of the trials' Sharpe ratios the
	// deflated Sharpe ratios assume.
	TrialVarRule string  `json:"trial_var_rule"`
	Counts       Counts  `json:"counts"`
	Groups       []Group `json:"groups"`
	// Notes says what the summary could not do or what a reader should
	// know (fewer than AdvisedSeeds seeds, days left out for the
	// volatility warm-up).
	Notes []string `json:"notes,omitempty"`
}

// Counts are the rows a summary, or one of its groups, was made from.
type Counts struct {
	Results      int      `json:"results"`
	AgentRuns    int      `json:"agent_runs"` // agent rows: one a seed, window and series
	Abstained    int      `json:"abstained"`  // agent rows whose run abstained (flat)
	BaselineRuns int      `json:"baseline_runs"`
	Seeds        []uint64 `json:"seeds"`
	Windows      int      `json:"windows"`
	Series       int      `json:"series"`
}

// Group is every figure of the agent and the baselines on one set of
// series: those the agent trained on, or those left out of its training.
type Group struct {
	Name   string   `json:"name"` // GroupTraining or GroupLeftOut
	Series []string `json:"series"`
	Counts Counts   `json:"counts"`
	// DaysPerYear annualises the group's portfolio figures.
	DaysPerYear float64 `json:"days_per_year"`
	// Weights are the portfolio's: SummaryOptions.Weights, or
	// WeightsEqual where the days after the inverse-volatility warm-up
	// are fewer than stats.MinBars (a Note says so).
	Weights string `json:"weights"`
	From    string `json:"from"` // the portfolio's first and last day, YYYY-MM-DD
	To      string `json:"to"`
	// WarmupCells are the series-days left out of every portfolio for
	// want of VolMinDays days of volatility history.
	WarmupCells int `json:"warmup_cells"`
	// Agent is the portfolio of the agent's mean over seeds (each day,
	// each series' return averaged over the seeds: capital split among
	// them), SeedMeanSharpe the mean of the seeds' portfolio Sharpe
	// ratios with its interval (stats.Bootstrap.Joint over the days all
	// seeds share; absent below stats.MinBars of them), Seeds each seed's
	// portfolio.
	Agent          Measure         `json:"agent"`
	SeedMeanSharpe *stats.Interval `json:"seed_mean_sharpe,omitempty"`
	Seeds          []SeedSummary   `json:"seeds"`
	Baselines      []Measure       `json:"baselines"`
	// VsBaselines compares Agent with each baseline's portfolio on the
	// same series-days.
	VsBaselines []Comparison `json:"vs_baselines"`
	PerSeries   []SeriesRow  `json:"per_series"`
	PerYear     []YearRow    `json:"per_year"`
	// WinsCells is, per baseline, the share of (window, series) cells
	// where the Sharpe ratio of the agent's mean over seeds is above the
	// baseline's; WinsSeries the share of series, on each series' whole
	// test record.
	WinsCells  []Wins `json:"wins_cells"`
	WinsSeries []Wins `json:"wins_series"`

	// portfolios are the daily returns Agent and Baselines measure
	// (Group.Portfolios); summary.json leaves them out.
	portfolios []Portfolio
}

// Measure is one strategy's portfolio over a group's series.
type Measure struct {
	Strategy string `json:"strategy"`
	Seed     uint64 `json:"seed,omitempty"`
	Days     int    `json:"days"`
	// Sharpe is annualised, with its block-bootstrap interval (Resamples
	// 0: too few days for one, Lo = Hi = Estimate), T the t-statistic
	// SR·√n of the daily Sharpe ratio, PSR the probability that the true
	// Sharpe ratio is above 0 (one trial) and DSR, for the agent only,
	// the deflated Sharpe ratio with SummaryOptions.Trials. PSR and DSR
	// are absent for returns of no variance (a flat strategy).
	Sharpe       stats.Interval `json:"sharpe"`
	T            float64        `json:"t"`
	PSR          *float64       `json:"psr,omitempty"`
	DSR          *float64       `json:"dsr,omitempty"`
	AnnualReturn float64        `json:"annual_return"` // mean daily return × days a year
	AnnualVol    float64        `json:"annual_vol"`
	TotalReturn  float64        `json:"total_return"` // compounded
	MaxDrawdown  float64        `json:"max_drawdown"` // of the compounded portfolio
	// Turnover (full positions traded a year) and Costs (a share of the
	// initial capital paid a year) are over the strategy's rows, each
	// row weighted by its length in years: what one series' book trades
	// and pays a year on average.
	Turnover  float64 `json:"turnover"`
	Costs     float64 `json:"costs"`
	Runs      int     `json:"runs"`
	Abstained int     `json:"abstained,omitempty"`
}

// SeedSummary is one seed's portfolio, its comparisons with the
// baselines and its share of winning cells.
type SeedSummary struct {
	Measure
	VsBaselines []Comparison `json:"vs_baselines"`
	WinsCells   []Wins       `json:"wins_cells"`
}

// Comparison is the agent's portfolio against a baseline's on the same
// series-days: SharpeDiff the annualised SR(agent) − SR(baseline) with
// its paired block-bootstrap interval (stats.Bootstrap.SharpeDiff), and
// Beats its lower end above 0.
type Comparison struct {
	Baseline   string         `json:"baseline"`
	Days       int            `json:"days"`
	SharpeDiff stats.Interval `json:"sharpe_diff"`
	Beats      bool           `json:"beats"`
}

// SharpeCell is one strategy's annualised Sharpe ratio with its interval
// over some days.
type SharpeCell struct {
	Strategy string         `json:"strategy"`
	Days     int            `json:"days"`
	Sharpe   stats.Interval `json:"sharpe"`
}

// SeriesRow is one series' whole test record: the agent's mean over seeds
// and each baseline.
type SeriesRow struct {
	Series      string       `json:"series"`
	InTraining  bool         `json:"in_training"`
	DaysPerYear float64      `json:"days_per_year"`
	Windows     int          `json:"windows"`
	AgentRuns   int          `json:"agent_runs"`
	Abstained   int          `json:"abstained"`
	Agent       SharpeCell   `json:"agent"`
	Baselines   []SharpeCell `json:"baselines"`
}

// YearRow is the group's portfolios in one calendar year (UTC).
type YearRow struct {
	Year      int          `json:"year"`
	Agent     SharpeCell   `json:"agent"`
	Baselines []SharpeCell `json:"baselines"`
}

// Wins is the share of comparisons the agent wins against Baseline.
type Wins struct {
	Baseline string `json:"baseline"`
	stats.Proportion
}

// baselineOrder is the order baselines are reported in; others follow by
// name.
var baselineOrder = []string{walkforward.StrategyFlat, walkforward.StrategyBuyAndHold, walkforward.StrategyMomentum, walkforward.StrategyBestRule}

// Summarize measures a study's results (Output.Results): per group of
// series (GroupTraining, and GroupLeftOut when some series were left
// out), the portfolio across series of the agent's mean over seeds, of
// each seed and of each baseline (weights: SummaryOptions.Weights), with
// their Sharpe ratios, intervals, t-statistics, deflated Sharpe ratios,
// drawdowns, turnover and costs; the agent against each baseline on the
// same days; per series and per year tables; the shares of cells and of
// series the agent wins. Where test blocks overlap (Layout.Step shorter
// than Test), a series' day is taken from the latest window that tests
// it, the model a deployment would be trading then. Every error names
// the row (its index, window, series and strategy) or the option.
func Summarize(res []walkforward.Result, opt SummaryOptions) (Summary, error) {
	opt, rule, err := opt.resolve()
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Options: opt, TrialVarRule: rule}
	if len(res) == 0 {
		return sum, fmt.Errorf("summarize: no results")
	}
	var order []string
	seen := map[string]bool{}
	for i, r := range res {
		if err := checkRow(i, r); err != nil {
			return sum, err
		}
		if !seen[r.Series] {
			seen[r.Series] = true
			order = append(order, r.Series)
		}
	}
	sum.Counts = countRows(res)
	if n := len(sum.Counts.Seeds); n < AdvisedSeeds {
		sum.Notes = append(sum.Notes, fmt.Sprintf("%d seed(s): at least %d are needed for the mean over seeds and its spread to mean much", n, AdvisedSeeds))
	}
	for _, g := range []struct {
		name string
		in   bool
	}{{GroupTraining, true}, {GroupLeftOut, false}} {
		var rows []walkforward.Result
		for _, r := range res {
			if r.InTraining == g.in {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		grp, notes, err := summarizeGroup(g.name, rows, order, opt)
		sum.Notes = append(sum.Notes, notes...)
		if err != nil {
			return sum, err
		}
		if grp != nil {
			sum.Groups = append(sum.Groups, *grp)
		}
	}
	return sum, nil
}

// resolve fills in opt's defaults, checks it and says what variance of
// the trials' Sharpe ratios the deflated Sharpe ratios assume.
func (opt SummaryOptions) resolve() (SummaryOptions, string, error) {
	if opt.Trials < 1 {
		return opt, "", fmt.Errorf("summarize: trials %d: at least the reported configuration was tried, so ≥ 1 (results.json's trials.total)", opt.Trials)
	}
	if math.IsNaN(opt.DaysPerYear) || math.IsInf(opt.DaysPerYear, 0) || opt.DaysPerYear < 0 {
		return opt, "", fmt.Errorf("summarize: days per year %v: want a positive number, or 0 to take the results'", opt.DaysPerYear)
	}
	if math.IsNaN(opt.TrialVar) || math.IsInf(opt.TrialVar, 0) || opt.TrialVar < 0 {
		return opt, "", fmt.Errorf("summarize: trial variance %v: want a positive number, or 0 for 1/n", opt.TrialVar)
	}
	opt.Weights = cmp.Or(opt.Weights, WeightsInverseVol)
	if opt.Weights != WeightsInverseVol && opt.Weights != WeightsEqual {
		return opt, "", fmt.Errorf("summarize: weights %q: want %s or %s", opt.Weights, WeightsInverseVol, WeightsEqual)
	}
	opt.VolDays = cmp.Or(opt.VolDays, DefaultVolDays)
	opt.VolMinDays = cmp.Or(opt.VolMinDays, min(DefaultVolMinDays, opt.VolDays))
	if opt.VolDays < 2 || opt.VolMinDays < 2 || opt.VolMinDays > opt.VolDays {
		return opt, "", fmt.Errorf("summarize: volatility window %d days, %d at least: want 2 ≤ min days ≤ window", opt.VolDays, opt.VolMinDays)
	}
	if opt.Bootstrap.Level == 0 {
		opt.Bootstrap.Level = stats.DefaultLevel
	}
	if opt.Bootstrap.Resamples == 0 {
		opt.Bootstrap.Resamples = stats.DefaultResamples
	}
	rule := fmt.Sprintf("variance of the %d trials' per-day Sharpe ratios given: %g", opt.Trials, opt.TrialVar)
	if opt.TrialVar == 0 {
		rule = fmt.Sprintf("variance of the %d trials' per-day Sharpe ratios assumed 1/n (n the portfolio's days): independent trials without skill", opt.Trials)
	}
	return opt, rule, nil
}

// checkRow says what in row i makes it unusable.
func checkRow(i int, r walkforward.Result) error {
	at := fmt.Sprintf("summarize: result %d (window %d, %s, %s seed %d)", i, r.Window, r.Series, r.Strategy, r.Seed)
	switch {
	case r.Series == "" || r.Strategy == "":
		return fmt.Errorf("%s: no series or strategy", at)
	case len(r.Days) != len(r.Returns):
		return fmt.Errorf("%s: %d days and %d returns: want one return a day", at, len(r.Days), len(r.Returns))
	case math.IsNaN(r.DaysPerYear) || math.IsInf(r.DaysPerYear, 0) || r.DaysPerYear < 0:
		return fmt.Errorf("%s: days_per_year %v: want a positive number", at, r.DaysPerYear)
	}
	for j, v := range r.Returns {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: return %d (day %d) is %v: want a finite number", at, j, r.Days[j], v)
		}
		if j > 0 && r.Days[j] <= r.Days[j-1] {
			return fmt.Errorf("%s: day %d (%d) is not after day %d (%d): days must increase", at, j, r.Days[j], j-1, r.Days[j-1])
		}
	}
	return nil
}

// countRows counts rows by kind, seeds, windows and series.
func countRows(rows []walkforward.Result) Counts {
	c := Counts{Results: len(rows)}
	seeds, windows, series := map[uint64]bool{}, map[int]bool{}, map[string]bool{}
	for _, r := range rows {
		windows[r.Window], series[r.Series] = true, true
		if r.Strategy != walkforward.StrategyAgent {
			c.BaselineRuns++
			continue
		}
		c.AgentRuns++
		if r.Detail == walkforward.DetailAbstained {
			c.Abstained++
		}
		if !seeds[r.Seed] {
			seeds[r.Seed] = true
			c.Seeds = append(c.Seeds, r.Seed)
		}
	}
	slices.Sort(c.Seeds)
	c.Windows, c.Series = len(windows), len(series)
	return c
}

// measure is the figures of portfolio returns r (annualised with dpy) of
// strategy (seed) whose rows are rows; deflate adds the deflated Sharpe
// ratio.
func (g *grouper) measure(strategy string, seed uint64, r []float64, rows []walkforward.Result, deflate bool) Measure {
	m := Measure{Strategy: strategy, Seed: seed, Days: len(r), Sharpe: g.sharpe(r, g.dpy)}
	if e, err := stats.EstimateSharpe(r); err == nil {
		m.T = e.TStat()
		if p, err := e.PSR(0); err == nil {
			m.PSR = &p
		}
		if deflate {
			v := g.opt.TrialVar
			if v == 0 {
				v = 1 / float64(len(r))
			}
			if d, err := e.Deflated(g.opt.Trials, v); err == nil {
				m.DSR = &d
			}
		}
	}
	m.AnnualReturn = stats.Mean(r) * g.dpy
	m.AnnualVol = stats.StdDev(r) * math.Sqrt(g.dpy)
	eq := make([]float64, len(r)+1)
	eq[0] = 1
	for i, v := range r {
		eq[i+1] = eq[i] * (1 + v)
	}
	m.TotalReturn, m.MaxDrawdown = eq[len(r)]-1, sim.MaxDrawdown(eq)
	var years float64
	for _, row := range rows {
		m.Runs++
		if row.Detail == walkforward.DetailAbstained {
			m.Abstained++
		}
		if row.DaysPerYear > 0 {
			y := float64(len(row.Days)) / row.DaysPerYear
			years += y
			m.Turnover += row.Turnover * y
			m.Costs += row.Costs
		}
	}
	if years > 0 {
		m.Turnover /= years
		m.Costs /= years
	}
	return m
}

// sharpe is the annualised Sharpe ratio of r with its interval, or the
// estimate alone (Resamples 0) where r is too short for one.
func (g *grouper) sharpe(r []float64, dpy float64) stats.Interval {
	iv, err := g.opt.Bootstrap.Sharpe(r)
	if err != nil {
		a := stats.Annualise(stats.Sharpe(r), dpy)
		return stats.Interval{Estimate: a, Lo: a, Hi: a, Level: g.opt.Bootstrap.Level}
	}
	return iv.Annualised(dpy)
}

// compare is a against b's returns c on the same days.
func (g *grouper) compare(b string, a, c []float64) Comparison {
	out := Comparison{Baseline: b, Days: len(a)}
	iv, err := g.opt.Bootstrap.SharpeDiff(a, c)
	if err != nil {
		d := stats.Annualise(stats.Sharpe(a)-stats.Sharpe(c), g.dpy)
		out.SharpeDiff = stats.Interval{Estimate: d, Lo: d, Hi: d, Level: g.opt.Bootstrap.Level}
		return out
	}
	out.SharpeDiff = iv.Annualised(g.dpy)
	out.Beats = out.SharpeDiff.Lo > 0
	return out
}

// wins is ShareOfWins of agent against each baseline's values, over the
// keys both have; a baseline with no key in common is left out.
func (g *grouper) wins(agent map[cellKey]float64, base map[string]map[cellKey]float64) []Wins {
	var out []Wins
	for _, b := range g.baselines {
		var a, c []float64
		for _, k := range sortedKeys(agent) {
			if v, ok := base[b][k]; ok {
				a, c = append(a, agent[k]), append(c, v)
			}
		}
		if p, err := stats.ShareOfWins(a, c, g.opt.Bootstrap.Level); err == nil {
			out = append(out, Wins{Baseline: b, Proportion: p})
		}
	}
	return out
}
