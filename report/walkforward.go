package report

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/walkforward/summary"
)

// WalkForward is what a walk-forward study's report shows: the study
// (results.json, or its rows in the store) and its summary
// (summary.Summarize of its results, which the caller runs, so that
// the page and summary.json hold the same figures).
type WalkForward struct {
	ID string
	// From says where the study was read: a file, or the metadata store.
	From    string
	Study   walkforward.Output
	Summary summary.Summary
}

// WriteWalkForward writes a study's report into dir (index.html with the
// plots inlined, and each plot as a PNG) and returns the path of
// index.html. Per group of series (those the agent trained on, those left
// out) it shows the headline portfolio figures of the agent's mean over
// seeds, each seed and each baseline; the agent against each baseline;
// the per-series and per-year tables; and three plots: the portfolios'
// compounded equity (GROUP-equity.png), their Sharpe ratios with their
// intervals (GROUP-sharpe.png), and each series' (GROUP-series-sharpe.png).
func WriteWalkForward(dir string, w WalkForward) (string, error) {
	var figs []Figure
	// The headline: per group the agent's portfolio Sharpe ratio with its
	// interval, its DSR and its difference with buy-and-hold and
	// momentum, then the summary's notes, as "walkforward summarize"
	// prints them.
	sections := []section{{Title: "Headline", Pre: strings.TrimSpace(w.Summary.Headline())}}
	for _, g := range w.Summary.Groups {
		gfigs, err := walkForwardFigures(g)
		if err != nil {
			return "", fmt.Errorf("report of walk-forward %s, %s series: %w", w.ID, g.Name, err)
		}
		figs = append(figs, gfigs...)
		sections = append(sections, groupSections(w.Summary, g, gfigs)...)
	}
	if len(w.Study.Notes) > 0 {
		sections = append(sections, section{Title: "What the study could not do", Pre: strings.Join(w.Study.Notes, "\n")})
	}
	sections = append(sections, section{Title: "Study", Table: studyTable(w)})
	if cfg, err := json.Marshal(w.Study.Config); err == nil {
		sections = append(sections, section{Title: "Agent config", Pre: configJSON(cfg)})
	}
	p := page{
		Title: "Walk-forward " + w.ID,
		Subtitle: fmt.Sprintf("%d windows, %d series, %d seeds, %d results; DSR over %d trials",
			w.Summary.Counts.Windows, w.Summary.Counts.Series, len(w.Summary.Counts.Seeds), len(w.Study.Results), w.Summary.Options.Trials),
		Generated: time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Sections:  sections,
	}
	return writePage(dir, p, figs)
}

// strategyName is how the report names a strategy: the agent is its mean
// over seeds.
func strategyName(s string, seeds int) string {
	if s == walkforward.StrategyAgent {
		return fmt.Sprintf("agent (mean of %d seeds)", seeds)
	}
	return s
}

// groupSections are a group's sections: headline, agent against the
// baselines, per series, per year.
func groupSections(s summary.Summary, g summary.Group, figs []Figure) []section {
	title := summary.GroupTitle(g.Name)
	head := &table{Header: []string{"portfolio", "days", "Sharpe", levelHeader(g.Agent), "t", "PSR", "DSR",
		"annual return", "annual vol", "total return", "max drawdown", "turnover / yr", "costs / yr", "runs"}, Mark: 0}
	add := func(name string, m summary.Measure) {
		head.Rows = append(head.Rows, []string{name, fmt.Sprint(m.Days), fmt.Sprintf("%.2f", m.Sharpe.Estimate), intervalOnly(m),
			fmt.Sprintf("%.2f", m.T), summary.ProbText(m.PSR), summary.ProbText(m.DSR),
			pct(m.AnnualReturn), pct(m.AnnualVol), pct(m.TotalReturn), pct(m.MaxDrawdown),
			fmt.Sprintf("%.1f", m.Turnover), pct(m.Costs), fmt.Sprint(m.Runs)})
	}
	add(strategyName(walkforward.StrategyAgent, len(g.Seeds)), g.Agent)
	for _, sd := range g.Seeds {
		add(fmt.Sprintf("agent seed %d", sd.Seed), sd.Measure)
	}
	for _, b := range g.Baselines {
		add(b.Strategy, b)
	}
	text := fmt.Sprintf("%d series (%s), %s to %s, %.0f days a year; portfolio weights %s; DSR over %d trials.",
		len(g.Series), strings.Join(g.Series, ", "), g.From, g.To, g.DaysPerYear, g.Weights, s.Options.Trials)
	if g.SeedMeanSharpe != nil {
		text += " Mean of the seeds' portfolio Sharpe ratios: " + summary.IntervalText(*g.SeedMeanSharpe) + "."
	}
	vs := &table{Header: []string{"baseline", "days", "agent − baseline Sharpe", "beats (interval above 0)", "windows × series won", "series won"}, Mark: -1}
	for _, c := range g.VsBaselines {
		vs.Rows = append(vs.Rows, []string{c.Baseline, fmt.Sprint(c.Days), summary.DiffText(c.SharpeDiff), yesNo(c.Beats),
			summary.WinsText(g.WinsCells, c.Baseline), summary.WinsText(g.WinsSeries, c.Baseline)})
	}
	var portfolioFigs, seriesFigs []Figure
	for _, f := range figs {
		if strings.HasSuffix(f.Name, "-series-sharpe.png") {
			seriesFigs = append(seriesFigs, f)
		} else {
			portfolioFigs = append(portfolioFigs, f)
		}
	}
	baseHeader := func(first ...string) []string {
		h := append(first, strategyName(walkforward.StrategyAgent, len(g.Seeds)))
		for _, b := range g.Baselines {
			h = append(h, b.Strategy)
		}
		return h
	}
	ps := &table{Header: baseHeader("series", "in training", "windows", "agent runs", "abstained"), Mark: -1}
	for _, r := range g.PerSeries {
		row := []string{r.Series, yesNo(r.InTraining), fmt.Sprint(r.Windows), fmt.Sprint(r.AgentRuns), fmt.Sprint(r.Abstained),
			summary.CellText(r.Agent)}
		ps.Rows = append(ps.Rows, append(row, baselineCells(g, r.Baselines)...))
	}
	py := &table{Header: baseHeader("year"), Mark: -1}
	for _, r := range g.PerYear {
		py.Rows = append(py.Rows, append([]string{fmt.Sprint(r.Year), summary.CellText(r.Agent)}, baselineCells(g, r.Baselines)...))
	}
	return []section{
		{Title: title + ": portfolios", Text: text, Table: head},
		{Title: title + ": the agent against each baseline",
			Text:  "The Sharpe difference is on the series-days both portfolios have, with its paired block-bootstrap interval; the shares won are of the cells (window, series) and of the series' whole test records.",
			Table: vs, Figures: portfolioFigs},
		{Title: title + ": per series", Text: "Annualised Sharpe ratio [interval] of each series' whole test record.", Table: ps, Figures: seriesFigs},
		{Title: title + ": per year", Text: "The portfolios' annualised Sharpe ratio [interval] in each calendar year (UTC).", Table: py},
	}
}

// baselineCells are the cells of cs in the order of g's baselines, "–"
// for one that has none.
func baselineCells(g summary.Group, cs []summary.SharpeCell) []string {
	out := make([]string, len(g.Baselines))
	for i, b := range g.Baselines {
		out[i] = "–"
		for _, c := range cs {
			if c.Strategy == b.Strategy {
				out[i] = summary.CellText(c)
			}
		}
	}
	return out
}

// levelHeader names the interval column: "95 % interval".
func levelHeader(m summary.Measure) string {
	if m.Sharpe.Level > 0 {
		return fmt.Sprintf("%.0f %% interval", 100*m.Sharpe.Level)
	}
	return "interval"
}

// intervalOnly is "[lo, hi]", or "–" without one.
func intervalOnly(m summary.Measure) string {
	if m.Sharpe.Resamples == 0 {
		return "–"
	}
	return fmt.Sprintf("[%.2f, %.2f]", m.Sharpe.Lo, m.Sharpe.Hi)
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

// studyTable is what the study was: where it was read from, its windows,
// series, seeds, trials and the time it took.
func studyTable(w WalkForward) *table {
	st := w.Study
	t := &table{Header: []string{"", ""}, Mark: -1, Rows: [][]string{
		{"read from", w.From},
		{"windows", fmt.Sprint(max(len(st.Windows), w.Summary.Counts.Windows))},
		{"series", fmt.Sprint(w.Summary.Counts.Series)},
		{"seeds", fmt.Sprint(st.Seeds)},
		{"results", fmt.Sprint(len(st.Results))},
		{"trials (study + prior)", fmt.Sprintf("%d (%d + %d)", st.Trials.Total, st.Trials.Study, st.Trials.Prior)},
	}}
	if len(st.LeaveOut) > 0 {
		t.Rows = append(t.Rows, []string{"left out of training", strings.Join(st.LeaveOut, ", ")})
	}
	if st.Gate != "" {
		t.Rows = append(t.Rows, []string{"gate", st.Gate})
	}
	t.Rows = append(t.Rows, []string{"panel", yesNo(st.Panel)})
	if st.Stopped != "" {
		t.Rows = append(t.Rows, []string{"stopped", st.Stopped})
	}
	if st.Device != "" {
		t.Rows = append(t.Rows, []string{"trained on", st.Device})
	}
	if st.Seconds > 0 {
		t.Rows = append(t.Rows, []string{"took", (time.Duration(st.Seconds * float64(time.Second))).Round(time.Second).String()})
	}
	if n := len(st.Windows); n > 0 {
		f := "2006-01-02"
		t.Rows = append(t.Rows, []string{"test blocks", fmt.Sprintf("%s to %s", st.Windows[0].TestFrom.Format(f), st.Windows[n-1].TestTo.Format(f))})
	}
	return t
}

// walkForwardFigures draws a group's plots.
func walkForwardFigures(g summary.Group) ([]Figure, error) {
	seeds := len(g.Seeds)
	var curves []series
	for _, p := range g.Portfolios() {
		eq := p.Equity()
		s := series{name: strategyName(p.Strategy, seeds), xy: make(plotter.XYs, len(eq))}
		for i, d := range p.Days {
			s.xy[i].X, s.xy[i].Y = float64(d)*86400, eq[i] // a day's Unix seconds
		}
		curves = append(curves, s)
	}
	title := summary.GroupTitle(g.Name)
	eqPNG, err := linePlot(title+": portfolio equity", "day", "equity (1 = start)", true, curves...)
	if err != nil {
		return nil, err
	}
	var figs []Figure
	if eqPNG != nil {
		figs = append(figs, Figure{Name: g.Name + "-equity.png", Title: "Portfolio equity", PNG: eqPNG,
			Note: fmt.Sprintf("Compounded daily returns of the %s portfolio across the series of the agent's mean over seeds and of each baseline.", g.Weights)})
	}
	labels := []string{strategyName(walkforward.StrategyAgent, seeds)}
	ms := []summary.Measure{g.Agent}
	for _, sd := range g.Seeds {
		labels, ms = append(labels, fmt.Sprintf("seed %d", sd.Seed)), append(ms, sd.Measure)
	}
	for _, b := range g.Baselines {
		labels, ms = append(labels, b.Strategy), append(ms, b)
	}
	one := intervalSeries{name: "Sharpe"}
	for _, m := range ms {
		one.add(m.Sharpe.Estimate, m.Sharpe.Lo, m.Sharpe.Hi, m.Sharpe.Resamples > 0)
	}
	shPNG, err := intervalPlot(title+": portfolio Sharpe ratio", "annualised Sharpe", labels, one)
	if err != nil {
		return nil, err
	}
	figs = append(figs, Figure{Name: g.Name + "-sharpe.png", Title: "Portfolio Sharpe ratios", PNG: shPNG,
		Note: fmt.Sprintf("Each portfolio's annualised Sharpe ratio (dot) and its block-bootstrap %s (bar).", levelHeader(g.Agent))})
	var names []string
	bySeries := []intervalSeries{{name: strategyName(walkforward.StrategyAgent, seeds)}}
	for _, b := range g.Baselines {
		bySeries = append(bySeries, intervalSeries{name: b.Strategy})
	}
	for _, r := range g.PerSeries {
		names = append(names, r.Series)
		cells := append([]summary.SharpeCell{r.Agent}, r.Baselines...)
		for i := range bySeries {
			c := cellOf(cells, i, g)
			bySeries[i].add(c.Sharpe.Estimate, c.Sharpe.Lo, c.Sharpe.Hi, c.Days > 0 && c.Sharpe.Resamples > 0)
			if c.Days == 0 {
				bySeries[i].est[len(bySeries[i].est)-1] = math.NaN()
			}
		}
	}
	serPNG, err := intervalPlot(title+": Sharpe ratio per series", "annualised Sharpe", names, bySeries...)
	if err != nil {
		return nil, err
	}
	figs = append(figs, Figure{Name: g.Name + "-series-sharpe.png", Title: "Sharpe ratio per series", PNG: serPNG,
		Note: "Each series' whole test record: the agent's mean over seeds and each baseline, with intervals."})
	return figs, nil
}

// cellOf is strategy i's cell (0 the agent, then g's baselines in order)
// among cs, or an empty cell.
func cellOf(cs []summary.SharpeCell, i int, g summary.Group) summary.SharpeCell {
	if i == 0 {
		return cs[0]
	}
	for _, c := range cs[1:] {
		if c.Strategy == g.Baselines[i-1].Strategy {
			return c
		}
	}
	return summary.SharpeCell{}
}
