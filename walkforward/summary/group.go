package summary

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dqnflow/dqnflow/stats"
	"github.com/dqnflow/dqnflow/walkforward"
)

// grouper holds one group's calendar and its strategies' returns on it:
// what summarizeGroup measures.
type grouper struct {
	opt       SummaryOptions
	dpy       float64
	series    []string
	days      []int32 // the union of the group's rows' days, increasing
	grids     map[stratKey]*grid
	rows      map[stratKey][]walkforward.Result
	seeds     []uint64
	baselines []string
	mean      *grid       // the agent's mean over seeds
	weights   [][]float64 // weights[k][t] of series k on day t, NaN for none
}

// stratKey is a strategy and, for the agent, its seed.
type stratKey struct {
	strategy string
	seed     uint64
}

// cellKey is a (window, series) cell, or a series alone (window −1).
type cellKey struct {
	window int
	series string
}

// grid is a strategy's return ret[k][t] on series k and day t of the
// group's calendar (NaN where it has none), and the window it came from.
type grid struct {
	ret [][]float64
	win [][]int
}

func newGrid(k, n int) *grid {
	g := &grid{ret: make([][]float64, k), win: make([][]int, k)}
	for i := range g.ret {
		g.ret[i], g.win[i] = make([]float64, n), make([]int, n)
		for t := range n {
			g.ret[i][t], g.win[i][t] = math.NaN(), -1
		}
	}
	return g
}

// summarizeGroup measures the rows of one group (name), its series in
// the order of order.
func summarizeGroup(name string, rows []walkforward.Result, order []string, opt SummaryOptions) (*Group, []string, error) {
	g := &grouper{opt: opt, grids: map[stratKey]*grid{}, rows: map[stratKey][]walkforward.Result{}}
	var notes []string
	present := map[string]bool{}
	daySet := map[int32]bool{}
	others := map[string]bool{}
	for _, r := range rows {
		present[r.Series] = true
		for _, d := range r.Days {
			daySet[d] = true
		}
		g.dpy = max(g.dpy, r.DaysPerYear)
		k := stratKey{strategy: r.Strategy}
		if r.Strategy == walkforward.StrategyAgent {
			k.seed = r.Seed
		} else {
			others[r.Strategy] = true
		}
		g.rows[k] = append(g.rows[k], r)
	}
	if opt.DaysPerYear > 0 {
		g.dpy = opt.DaysPerYear
	}
	if !(g.dpy > 0) {
		return nil, notes, fmt.Errorf("summarize %s series: no result says its days a year: give the days per year", name)
	}
	for _, s := range order {
		if present[s] {
			g.series = append(g.series, s)
		}
	}
	for _, b := range baselineOrder {
		if others[b] {
			g.baselines = append(g.baselines, b)
			delete(others, b)
		}
	}
	rest := make([]string, 0, len(others))
	for b := range others {
		rest = append(rest, b)
	}
	slices.Sort(rest)
	g.baselines = append(g.baselines, rest...)
	for d := range daySet {
		g.days = append(g.days, d)
	}
	slices.Sort(g.days)
	if err := g.fill(name); err != nil {
		return nil, notes, err
	}
	counts := countRows(rows)
	g.seeds = counts.Seeds
	if len(g.seeds) == 0 {
		return nil, append(notes, fmt.Sprintf("%s series: no agent results (every window of theirs had no training series): not summarised", name)), nil
	}
	g.mean = g.seedMean()
	weights := opt.Weights
	warm, err := g.weigh(name, weights)
	if err != nil {
		return nil, notes, err
	}
	days, r, err := g.portfolio(g.mean.ret)
	if err != nil {
		return nil, notes, fmt.Errorf("summarize %s series: %w", name, err)
	}
	// A study shorter than the volatility warm-up (weekly test blocks)
	// would have no portfolio at all: it gets equal weights instead.
	if weights == WeightsInverseVol && len(r) < stats.MinBars {
		notes = append(notes, fmt.Sprintf("%s series: %d days after the %d-day volatility warm-up, fewer than %d: the portfolio has equal weights instead of inverse-volatility ones",
			name, len(r), opt.VolMinDays, stats.MinBars))
		weights, warm = WeightsEqual, 0
		if _, err := g.weigh(name, weights); err != nil {
			return nil, notes, err
		}
		if days, r, err = g.portfolio(g.mean.ret); err != nil {
			return nil, notes, fmt.Errorf("summarize %s series: %w", name, err)
		}
	}
	if warm > 0 {
		notes = append(notes, fmt.Sprintf("%s series: %d series-days left out of every portfolio, before each series had %d days of volatility history", name, warm, opt.VolMinDays))
	}
	out := &Group{Name: name, Series: g.series, Counts: counts, DaysPerYear: g.dpy, Weights: weights, WarmupCells: warm}
	var agentRows []walkforward.Result
	for _, s := range g.seeds {
		agentRows = append(agentRows, g.rows[stratKey{walkforward.StrategyAgent, s}]...)
	}
	if len(r) == 0 {
		return nil, append(notes, fmt.Sprintf("%s series: no day has a weighted series: not summarised", name)), nil
	}
	out.From, out.To = dayString(days[0]), dayString(days[len(days)-1])
	out.Agent = g.measure(walkforward.StrategyAgent, 0, r, agentRows, true)
	out.portfolios = append(out.portfolios, Portfolio{Strategy: walkforward.StrategyAgent, Days: days, Returns: r})
	base := map[string]portfolio{}
	for _, b := range g.baselines {
		var p portfolio
		if p.days, p.ret, err = g.portfolio(g.grids[stratKey{strategy: b}].ret); err != nil {
			return nil, notes, fmt.Errorf("summarize %s series, %s: %w", name, b, err)
		}
		base[b] = p
		out.portfolios = append(out.portfolios, Portfolio{Strategy: b, Days: p.days, Returns: p.ret})
		out.Baselines = append(out.Baselines, g.measure(b, 0, p.ret, g.rows[stratKey{strategy: b}], false))
		c, err := g.paired(b, g.mean)
		if err != nil {
			return nil, notes, fmt.Errorf("summarize %s series, agent against %s: %w", name, b, err)
		}
		out.VsBaselines = append(out.VsBaselines, c)
	}
	cells, baseCells := g.cellSharpes()
	out.WinsCells = g.wins(cells[0], baseCells)
	var seedPorts [][]int32
	var seedRets [][]float64
	for i, s := range g.seeds {
		k := stratKey{walkforward.StrategyAgent, s}
		sd, sr, err := g.portfolio(g.grids[k].ret)
		if err != nil {
			return nil, notes, fmt.Errorf("summarize %s series, seed %d: %w", name, s, err)
		}
		seedPorts, seedRets = append(seedPorts, sd), append(seedRets, sr)
		ss := SeedSummary{Measure: g.measure(walkforward.StrategyAgent, s, sr, g.rows[k], true)}
		for _, b := range g.baselines {
			c, err := g.paired(b, g.grids[k])
			if err != nil {
				return nil, notes, fmt.Errorf("summarize %s series, seed %d against %s: %w", name, s, b, err)
			}
			ss.VsBaselines = append(ss.VsBaselines, c)
		}
		ss.WinsCells = g.wins(cells[i+1], baseCells)
		out.Seeds = append(out.Seeds, ss)
	}
	out.SeedMeanSharpe = g.seedMeanSharpe(seedPorts, seedRets)
	out.PerSeries = g.perSeries(rows)
	seriesAgent, seriesBase := map[cellKey]float64{}, map[string]map[cellKey]float64{}
	for _, row := range out.PerSeries {
		k := cellKey{window: -1, series: row.Series}
		if row.Agent.Days > 0 {
			seriesAgent[k] = row.Agent.Sharpe.Estimate
		}
		for _, b := range row.Baselines {
			if seriesBase[b.Strategy] == nil {
				seriesBase[b.Strategy] = map[cellKey]float64{}
			}
			seriesBase[b.Strategy][k] = b.Sharpe.Estimate
		}
	}
	out.WinsSeries = g.wins(seriesAgent, seriesBase)
	out.PerYear = g.perYear(days, r, base)
	return out, notes, nil
}

// fill puts every row's returns on the group's calendar; where test
// blocks overlap, the latest window's return stands.
func (g *grouper) fill(name string) error {
	at := make(map[int32]int, len(g.days))
	for t, d := range g.days {
		at[d] = t
	}
	idx := map[string]int{}
	for k, s := range g.series {
		idx[s] = k
	}
	for key, rows := range g.rows {
		gr := newGrid(len(g.series), len(g.days))
		g.grids[key] = gr
		for _, r := range rows {
			k := idx[r.Series]
			for j, d := range r.Days {
				t := at[d]
				switch w := gr.win[k][t]; {
				case w == r.Window:
					return fmt.Errorf("summarize %s series: %s seed %d has two results for window %d on %s", name, r.Strategy, r.Seed, r.Window, r.Series)
				case r.Window > w:
					gr.ret[k][t], gr.win[k][t] = r.Returns[j], r.Window
				}
			}
		}
	}
	return nil
}

// seedMean is the agent's mean return over the seeds that have a return
// on each series-day.
func (g *grouper) seedMean() *grid {
	m := newGrid(len(g.series), len(g.days))
	for k := range g.series {
		for t := range g.days {
			sum, n := 0.0, 0
			for _, s := range g.seeds {
				gr := g.grids[stratKey{walkforward.StrategyAgent, s}]
				if v := gr.ret[k][t]; !math.IsNaN(v) {
					sum += v
					n++
					m.win[k][t] = max(m.win[k][t], gr.win[k][t])
				}
			}
			if n > 0 {
				m.ret[k][t] = sum / float64(n)
			}
		}
	}
	return m
}

// weigh sets the series' weights on the calendar (scheme: Weights*) and
// returns the series-days some strategy has a return on that have no
// weight.
func (g *grouper) weigh(name, scheme string) (int, error) {
	nk, n := len(g.series), len(g.days)
	switch scheme {
	case WeightsEqual:
		g.weights = make([][]float64, nk)
		for k := range g.weights {
			g.weights[k] = make([]float64, n)
			for t := range n {
				g.weights[k][t] = 1
			}
		}
		return 0, nil
	}
	bh := g.grids[stratKey{strategy: walkforward.StrategyBuyAndHold}]
	for k, s := range g.series {
		if bh == nil || !slices.ContainsFunc(bh.ret[k], func(v float64) bool { return !math.IsNaN(v) }) {
			return 0, fmt.Errorf("summarize %s series: %s has no %s results to size it by: inverse-volatility weights need them (or use weights %s)", name, s, walkforward.StrategyBuyAndHold, WeightsEqual)
		}
	}
	w, err := stats.InverseVolWeights(bh.ret, g.opt.VolDays, g.opt.VolMinDays)
	if err != nil {
		return 0, fmt.Errorf("summarize %s series: %w", name, err)
	}
	g.weights = w
	warm := 0
	for k := range nk {
		for t := range n {
			if !math.IsNaN(w[k][t]) {
				continue
			}
			for _, gr := range g.grids {
				if !math.IsNaN(gr.ret[k][t]) {
					warm++
					break
				}
			}
		}
	}
	return warm, nil
}

// portfolio is a portfolio's return on each day it has one.
type portfolio struct {
	days []int32
	ret  []float64
}

// portfolio is the weighted portfolio of ret on the days it has a
// return.
func (g *grouper) portfolio(ret [][]float64) ([]int32, []float64, error) {
	p, err := stats.WeightedPortfolio(ret, g.weights)
	if err != nil {
		return nil, nil, err
	}
	var days []int32
	var out []float64
	for t, v := range p {
		if !math.IsNaN(v) {
			days, out = append(days, g.days[t]), append(out, v)
		}
	}
	return days, out, nil
}

// paired compares the portfolio of agent with baseline b's on the
// series-days both have.
func (g *grouper) paired(b string, agent *grid) (Comparison, error) {
	bg := g.grids[stratKey{strategy: b}]
	a, c := newGrid(len(g.series), len(g.days)), newGrid(len(g.series), len(g.days))
	for k := range g.series {
		for t := range g.days {
			if x, y := agent.ret[k][t], bg.ret[k][t]; !math.IsNaN(x) && !math.IsNaN(y) {
				a.ret[k][t], c.ret[k][t] = x, y
			}
		}
	}
	_, ar, err := g.portfolio(a.ret)
	if err != nil {
		return Comparison{}, err
	}
	_, cr, err := g.portfolio(c.ret)
	if err != nil {
		return Comparison{}, err
	}
	return g.compare(b, ar, cr), nil
}

// cellSharpes is the per-day Sharpe ratio of each (window, series) cell:
// [0] the agent's mean over seeds, [1+i] seed i's, and each baseline's.
func (g *grouper) cellSharpes() ([]map[cellKey]float64, map[string]map[cellKey]float64) {
	agent := make([]map[cellKey]float64, 1+len(g.seeds))
	for i := range agent {
		agent[i] = map[cellKey]float64{}
	}
	type acc struct {
		sum map[int32]float64
		n   map[int32]int
	}
	means := map[cellKey]*acc{}
	for i, s := range g.seeds {
		for _, r := range g.rows[stratKey{walkforward.StrategyAgent, s}] {
			k := cellKey{r.Window, r.Series}
			agent[i+1][k] = stats.Sharpe(r.Returns)
			a := means[k]
			if a == nil {
				a = &acc{map[int32]float64{}, map[int32]int{}}
				means[k] = a
			}
			for j, d := range r.Days {
				a.sum[d] += r.Returns[j]
				a.n[d]++
			}
		}
	}
	for k, a := range means {
		days := make([]int32, 0, len(a.sum))
		for d := range a.sum {
			days = append(days, d)
		}
		slices.Sort(days)
		r := make([]float64, len(days))
		for i, d := range days {
			r[i] = a.sum[d] / float64(a.n[d])
		}
		agent[0][k] = stats.Sharpe(r)
	}
	base := map[string]map[cellKey]float64{}
	for _, b := range g.baselines {
		base[b] = map[cellKey]float64{}
		for _, r := range g.rows[stratKey{strategy: b}] {
			base[b][cellKey{r.Window, r.Series}] = stats.Sharpe(r.Returns)
		}
	}
	return agent, base
}

// seedMeanSharpe is the mean over seeds of their portfolios' Sharpe
// ratios, annualised, with its joint interval over the days every seed's
// portfolio has; nil with fewer than stats.MinBars such days.
func (g *grouper) seedMeanSharpe(days [][]int32, rets [][]float64) *stats.Interval {
	count := map[int32]int{}
	for _, ds := range days {
		for _, d := range ds {
			count[d]++
		}
	}
	series := make([][]float64, len(rets))
	for i, ds := range days {
		for j, d := range ds {
			if count[d] == len(days) {
				series[i] = append(series[i], rets[i][j])
			}
		}
	}
	iv, err := g.opt.Bootstrap.Joint(series, func(s [][]float64) float64 {
		sum := 0.0
		for _, r := range s {
			sum += stats.Sharpe(r)
		}
		return sum / float64(len(s))
	})
	if err != nil {
		return nil
	}
	iv = iv.Annualised(g.dpy)
	return &iv
}

// perSeries is each series' whole record: the agent's mean over seeds
// and each baseline, annualised with the series' own days a year.
func (g *grouper) perSeries(rows []walkforward.Result) []SeriesRow {
	out := make([]SeriesRow, len(g.series))
	windows := make([]map[int]bool, len(g.series))
	dpy := make([]float64, len(g.series))
	nrows := make([]int, len(g.series))
	for k, s := range g.series {
		out[k].Series, windows[k] = s, map[int]bool{}
		for _, r := range rows {
			if r.Series != s {
				continue
			}
			out[k].InTraining = r.InTraining
			windows[k][r.Window] = true
			dpy[k] += r.DaysPerYear
			nrows[k]++
			if r.Strategy == walkforward.StrategyAgent {
				out[k].AgentRuns++
				if r.Detail == walkforward.DetailAbstained {
					out[k].Abstained++
				}
			}
		}
		out[k].Windows = len(windows[k])
		out[k].DaysPerYear = cmp.Or(g.opt.DaysPerYear, dpy[k]/float64(nrows[k]))
	}
	cell := func(strategy string, gr *grid, k int) SharpeCell {
		var r []float64
		for _, v := range gr.ret[k] {
			if !math.IsNaN(v) {
				r = append(r, v)
			}
		}
		c := SharpeCell{Strategy: strategy, Days: len(r)}
		if len(r) > 0 {
			c.Sharpe = g.sharpe(r, out[k].DaysPerYear)
		}
		return c
	}
	for k := range g.series {
		out[k].Agent = cell(walkforward.StrategyAgent, g.mean, k)
		for _, b := range g.baselines {
			if c := cell(b, g.grids[stratKey{strategy: b}], k); c.Days > 0 {
				out[k].Baselines = append(out[k].Baselines, c)
			}
		}
	}
	return out
}

// perYear splits the agent's portfolio (days, r) and the baselines'
// (each on the days its portfolio has) by calendar year.
func (g *grouper) perYear(days []int32, r []float64, base map[string]portfolio) []YearRow {
	byYear := func(ds []int32, x []float64) map[int][]float64 {
		m := map[int][]float64{}
		for i, d := range ds {
			y := time.Unix(int64(d)*86400, 0).UTC().Year()
			m[y] = append(m[y], x[i])
		}
		return m
	}
	agent := byYear(days, r)
	baseYears := map[string]map[int][]float64{}
	for _, b := range g.baselines {
		baseYears[b] = byYear(base[b].days, base[b].ret)
	}
	years := make([]int, 0, len(agent))
	for y := range agent {
		years = append(years, y)
	}
	slices.Sort(years)
	var out []YearRow
	for _, y := range years {
		row := YearRow{Year: y, Agent: SharpeCell{Strategy: walkforward.StrategyAgent, Days: len(agent[y]), Sharpe: g.sharpe(agent[y], g.dpy)}}
		for _, b := range g.baselines {
			if x := baseYears[b][y]; len(x) > 0 {
				row.Baselines = append(row.Baselines, SharpeCell{Strategy: b, Days: len(x), Sharpe: g.sharpe(x, g.dpy)})
			}
		}
		out = append(out, row)
	}
	return out
}

// sortedKeys is m's keys by window, then series.
func sortedKeys(m map[cellKey]float64) []cellKey {
	ks := make([]cellKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b cellKey) int {
		return cmp.Or(cmp.Compare(a.window, b.window), cmp.Compare(a.series, b.series))
	})
	return ks
}

// dayString is day d (days since 1970-01-01) as YYYY-MM-DD.
func dayString(d int32) string {
	return time.Unix(int64(d)*86400, 0).UTC().Format(time.DateOnly)
}
