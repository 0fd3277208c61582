package summary

import (
	"fmt"
	"strings"

	"github.com/dqnflow/dqnflow/stats"
	"github.com/dqnflow/dqnflow/walkforward"
)

// groupTitle is how the report names a group.
var groupTitle = map[string]string{GroupTraining: "Series the agent trained on", GroupLeftOut: "Series left out of training"}

// Headline is the summary in a line a group: the portfolio Sharpe ratio
// of the agent's mean over seeds with its interval, its deflated Sharpe
// ratio, and its Sharpe difference with buy-and-hold and momentum.
func (s Summary) Headline() string {
	var b strings.Builder
	for _, g := range s.Groups {
		a := g.Agent
		fmt.Fprintf(&b, "%s (%d series, %s to %s): agent portfolio (mean of %d seeds) Sharpe %s (%s), t %.2f, DSR %s (%d trials)",
			strings.ReplaceAll(g.Name, "_", "-"), len(g.Series), g.From, g.To, len(g.Seeds), ivText(a.Sharpe), levelText(a.Sharpe), a.T, probText(a.DSR), s.Options.Trials)
		for _, c := range g.VsBaselines {
			if c.Baseline == walkforward.StrategyBuyAndHold || c.Baseline == walkforward.StrategyMomentum {
				fmt.Fprintf(&b, "; vs %s %s", c.Baseline, diffText(c.SharpeDiff))
			}
		}
		b.WriteString("\n")
	}
	for _, n := range s.Notes {
		b.WriteString("note: " + n + "\n")
	}
	return b.String()
}

// Markdown is the summary as a report a reader can paste: what the
// figures were made with, then per group the portfolios, the agent
// against each baseline, the per-series and per-year tables.
func (s Summary) Markdown() string {
	var b strings.Builder
	o := s.Options
	c := s.Counts
	fmt.Fprintf(&b, "# Walk-forward summary\n\n")
	fmt.Fprintf(&b, "- %d results: %d agent runs (%d abstained, flat), %d baseline runs; %d windows, %d series, seeds %v\n",
		c.Results, c.AgentRuns, c.Abstained, c.BaselineRuns, c.Windows, c.Series, c.Seeds)
	fmt.Fprintf(&b, "- deflated Sharpe ratio: %d configuration(s) tried; %s\n", o.Trials, s.TrialVarRule)
	if o.Weights == WeightsEqual {
		fmt.Fprintf(&b, "- portfolio: equal capital among the series present each day\n")
	} else {
		fmt.Fprintf(&b, "- portfolio: weights 1/σ, σ of each series' buy-and-hold daily returns over the %d days before (at least %d)\n", o.VolDays, o.VolMinDays)
	}
	fmt.Fprintf(&b, "- intervals: %s block bootstrap, %d resamples, %.0f %%, seed %d; Sharpe ratios annualised from daily returns\n",
		schemeText(o.Bootstrap.Scheme), o.Bootstrap.Resamples, 100*o.Bootstrap.Level, o.Bootstrap.Seed)
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "- note: %s\n", n)
	}
	for _, g := range s.Groups {
		writeGroup(&b, g)
	}
	return b.String()
}

// writeGroup writes one group's section.
func writeGroup(b *strings.Builder, g Group) {
	fmt.Fprintf(b, "\n## %s\n\n%s; %s to %s, %.0f days a year; weights %s", groupTitle[g.Name], strings.Join(g.Series, ", "), g.From, g.To, g.DaysPerYear, g.Weights)
	if g.WarmupCells > 0 {
		fmt.Fprintf(b, "; %d series-days in the volatility warm-up left out", g.WarmupCells)
	}
	fmt.Fprintf(b, "\n\n### Portfolio\n\n")
	fmt.Fprintf(b, "| strategy | days | Sharpe | interval | t | PSR | DSR | return a year | vol a year | max drawdown | turnover a year | costs a year | runs | abstained |\n")
	fmt.Fprintf(b, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, m Measure) {
		lo, hi := "–", "–"
		if m.Sharpe.Resamples > 0 {
			lo, hi = fmt.Sprintf("%.2f", m.Sharpe.Lo), fmt.Sprintf("%.2f", m.Sharpe.Hi)
		}
		fmt.Fprintf(b, "| %s | %d | %.2f | [%s, %s] | %.2f | %s | %s | %.2f %% | %.2f %% | %.2f %% | %.2f | %.3f %% | %d | %d |\n",
			name, m.Days, m.Sharpe.Estimate, lo, hi, m.T, probText(m.PSR), probText(m.DSR), 100*m.AnnualReturn, 100*m.AnnualVol,
			100*m.MaxDrawdown, m.Turnover, 100*m.Costs, m.Runs, m.Abstained)
	}
	row("agent, mean of seeds", g.Agent)
	for _, m := range g.Baselines {
		row(m.Strategy, m)
	}
	for _, sd := range g.Seeds {
		row(fmt.Sprintf("agent seed %d", sd.Seed), sd.Measure)
	}
	if g.SeedMeanSharpe != nil {
		fmt.Fprintf(b, "\nMean of the seeds' portfolio Sharpe ratios: %s (%s, joint bootstrap on the days all seeds share).\n", ivText(*g.SeedMeanSharpe), levelText(*g.SeedMeanSharpe))
	}

	fmt.Fprintf(b, "\n### Agent against each baseline\n\n")
	fmt.Fprintf(b, "| baseline | days | Sharpe difference | beats (interval above 0) | cells won | series won | seeds beating it |\n")
	fmt.Fprintf(b, "|---|---:|---|---|---|---|---:|\n")
	for _, c := range g.VsBaselines {
		beating := 0
		for _, sd := range g.Seeds {
			for _, sc := range sd.VsBaselines {
				if sc.Baseline == c.Baseline && sc.Beats {
					beating++
				}
			}
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %d of %d |\n", c.Baseline, c.Days, diffText(c.SharpeDiff), yesNo(c.Beats),
			winsText(g.WinsCells, c.Baseline), winsText(g.WinsSeries, c.Baseline), beating, len(g.Seeds))
	}

	var names []string
	for _, m := range g.Baselines {
		names = append(names, m.Strategy)
	}
	head := func(first string) {
		fmt.Fprintf(b, "| %s | agent |", first)
		for _, n := range names {
			fmt.Fprintf(b, " %s |", n)
		}
		fmt.Fprintf(b, "\n|---|---|%s\n", strings.Repeat("---|", len(names)))
	}
	cells := func(agent SharpeCell, base []SharpeCell) {
		fmt.Fprintf(b, " %s |", cellText(agent))
		for _, n := range names {
			t := "–"
			for _, c := range base {
				if c.Strategy == n {
					t = cellText(c)
				}
			}
			fmt.Fprintf(b, " %s |", t)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\n### Per series\n\nAnnualised Sharpe ratio [interval] of each series' whole test record; the agent's is of its mean over seeds, with the runs that abstained.\n\n")
	head("series")
	for _, r := range g.PerSeries {
		fmt.Fprintf(b, "| %s (%d of %d runs abstained) |", r.Series, r.Abstained, r.AgentRuns)
		cells(r.Agent, r.Baselines)
	}
	fmt.Fprintf(b, "\n### Per year\n\nAnnualised Sharpe ratio [interval] of each portfolio in each calendar year.\n\n")
	head("year")
	for _, r := range g.PerYear {
		fmt.Fprintf(b, "| %d |", r.Year)
		cells(r.Agent, r.Baselines)
	}
}

// ivText is "0.52 [−0.10, 1.10]", or the estimate alone without an
// interval.
func ivText(iv stats.Interval) string {
	if iv.Resamples == 0 {
		return fmt.Sprintf("%.2f [no interval: too few days]", iv.Estimate)
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f]", iv.Estimate, iv.Lo, iv.Hi)
}

// diffText is ivText with a sign.
func diffText(iv stats.Interval) string {
	if iv.Resamples == 0 {
		return fmt.Sprintf("%+.2f [no interval: too few days]", iv.Estimate)
	}
	return fmt.Sprintf("%+.2f [%+.2f, %+.2f]", iv.Estimate, iv.Lo, iv.Hi)
}

// cellText is a table cell's Sharpe ratio and interval.
func cellText(c SharpeCell) string {
	if c.Days == 0 {
		return "–"
	}
	if c.Sharpe.Resamples == 0 {
		return fmt.Sprintf("%.2f", c.Sharpe.Estimate)
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f]", c.Sharpe.Estimate, c.Sharpe.Lo, c.Sharpe.Hi)
}

// levelText is "95 %".
func levelText(iv stats.Interval) string { return fmt.Sprintf("%.0f %%", 100*iv.Level) }

// probText is a probability, or "–" when there is none.
func probText(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f", *p)
}

// winsText is "7 of 10 (0.70 [0.40, 0.89])" for baseline b, or "–".
func winsText(ws []Wins, b string) string {
	for _, w := range ws {
		if w.Baseline == b {
			return fmt.Sprintf("%d of %d (%.2f [%.2f, %.2f])", w.Wins, w.N, w.Share, w.Lo, w.Hi)
		}
	}
	return "–"
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

// schemeText is the bootstrap scheme's name ("" is circular).
func schemeText(s stats.Scheme) string {
	if s == "" {
		return string(stats.Circular)
	}
	return string(s)
}

// The text of summary.md's cells, for other pages of the same figures
// (`dqnflow report --walkforward`), so that both print them alike.

// IntervalText is "0.52 [−0.10, 1.10]", or the estimate alone where there
// is no interval.
func IntervalText(iv stats.Interval) string { return ivText(iv) }

// DiffText is IntervalText with signs: a difference of Sharpe ratios.
func DiffText(iv stats.Interval) string { return diffText(iv) }

// CellText is a per-series or per-year table cell: the Sharpe ratio and
// its interval, "–" over no days.
func CellText(c SharpeCell) string { return cellText(c) }

// WinsText is "7 of 10 (0.70 [0.40, 0.89])" for baseline b, or "–".
func WinsText(ws []Wins, b string) string { return winsText(ws, b) }

// ProbText is a probability (PSR, DSR) to three places, or "–".
func ProbText(p *float64) string { return probText(p) }

// GroupTitle names a group (GroupTraining, GroupLeftOut) for a reader.
func GroupTitle(name string) string {
	if t, ok := groupTitle[name]; ok {
		return t
	}
	return name
}
