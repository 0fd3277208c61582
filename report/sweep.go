package report

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
)

// Sweep is what a sweep's report shows: each grid point's run and result.
type Sweep struct {
	ID string
	// Keys are the grid's config keys (dotted paths), in the order shown.
	Keys   []string
	Points []SweepPoint
}

// SweepPoint is one run of a sweep.
type SweepPoint struct {
	RunID           string
	Values          map[string]json.RawMessage // the grid values of this run
	Status          metadata.Status
	Error           string
	Epochs          int
	BestEpoch       int
	BestValidSharpe *float64 // nil when the run has no validation score
	FinalLoss       *float64
}

// Ranked returns the points by best validation Sharpe, highest first;
// points without a score come last, in grid order.
func (s Sweep) Ranked() []SweepPoint {
	out := append([]SweepPoint(nil), s.Points...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].BestValidSharpe, out[j].BestValidSharpe
		switch {
		case a == nil:
			return false
		case b == nil:
			return true
		}
		return *a > *b
	})
	return out
}

// GridEffect is, for one grid key, the mean best validation Sharpe of the
// runs at each of its values (runs without a score are left out).
type GridEffect struct {
	Key    string
	Values []string  // the key's values, in first-seen grid order
	Mean   []float64 // NaN where no run at that value has a score
	Runs   []int     // runs with a score at each value
}

// Effects computes the GridEffect of every key.
func (s Sweep) Effects() []GridEffect {
	var out []GridEffect
	for _, k := range s.Keys {
		g := GridEffect{Key: k}
		index := map[string]int{}
		var sum []float64
		for _, p := range s.Points {
			v := rawValue(p.Values[k])
			i, ok := index[v]
			if !ok {
				i = len(g.Values)
				index[v] = i
				g.Values = append(g.Values, v)
				sum = append(sum, 0)
				g.Runs = append(g.Runs, 0)
			}
			if p.BestValidSharpe != nil {
				sum[i] += *p.BestValidSharpe
				g.Runs[i]++
			}
		}
		for i := range sum {
			m := math.NaN()
			if g.Runs[i] > 0 {
				m = sum[i] / float64(g.Runs[i])
			}
			g.Mean = append(g.Mean, m)
		}
		out = append(out, g)
	}
	return out
}

// WriteSweep writes a sweep's report into dir (index.html with the plots
// inlined, and each plot as a PNG) and returns the path of index.html.
func WriteSweep(dir string, s Sweep) (string, error) {
	ranked := s.Ranked()
	var figs []Figure
	labels := make([]string, len(ranked))
	values := make([]float64, len(ranked))
	for i, p := range ranked {
		labels[i] = fmt.Sprintf("#%d", i+1)
		values[i] = math.NaN()
		if p.BestValidSharpe != nil {
			values[i] = *p.BestValidSharpe
		}
	}
	png, err := barPlot("Runs ranked by best validation Sharpe", "best validation Sharpe", labels, values)
	if err != nil {
		return "", fmt.Errorf("report of sweep %s: %w", s.ID, err)
	}
	figs = append(figs, Figure{Name: "ranking.png", Title: "Ranking", PNG: png,
		Note: "Best validation Sharpe of each run, in rank order (#1 is the first row of the table)."})
	effects := s.Effects()
	for _, g := range effects {
		png, err := barPlot("Effect of "+g.Key, "mean best validation Sharpe", g.Values, g.Mean)
		if err != nil {
			return "", fmt.Errorf("report of sweep %s: %w", s.ID, err)
		}
		figs = append(figs, Figure{Name: "grid_" + strings.ReplaceAll(g.Key, ".", "_") + ".png", Title: "Effect of " + g.Key, PNG: png,
			Note: "Mean best validation Sharpe of the runs at each value of " + g.Key + ", over every value of the other keys."})
	}
	return writePage(dir, sweepPage(s, ranked, effects, figs), figs)
}

func sweepPage(s Sweep, ranked []SweepPoint, effects []GridEffect, figs []Figure) page {
	t := &table{Header: append(append([]string{"rank", "run"}, s.Keys...), "status", "epochs", "best valid Sharpe", "best epoch", "final loss"), Mark: -1}
	for i, p := range ranked {
		row := []string{fmt.Sprint(i + 1), p.RunID}
		for _, k := range s.Keys {
			row = append(row, rawValue(p.Values[k]))
		}
		loss := "–"
		if p.FinalLoss != nil {
			loss = fmt.Sprintf("%.4f", *p.FinalLoss)
		}
		row = append(row, storeStatus(p.Status, p.Error), fmt.Sprint(p.Epochs), f3(p.BestValidSharpe), fmt.Sprint(p.BestEpoch), loss)
		t.Rows = append(t.Rows, row)
	}
	if len(ranked) > 0 && ranked[0].BestValidSharpe != nil {
		t.Mark = 0
	}
	eff := &table{Header: []string{"key", "value", "runs scored", "mean best valid Sharpe"}, Mark: -1}
	for _, g := range effects {
		for i, v := range g.Values {
			m := "–"
			if !math.IsNaN(g.Mean[i]) {
				m = fmt.Sprintf("%.3f", g.Mean[i])
			}
			eff.Rows = append(eff.Rows, []string{g.Key, v, fmt.Sprint(g.Runs[i]), m})
		}
	}
	best := "no run has a validation score"
	if t.Mark == 0 {
		best = fmt.Sprintf("best: run %s, validation Sharpe %.3f", ranked[0].RunID, *ranked[0].BestValidSharpe)
	}
	return page{
		Title:     "Sweep " + s.ID,
		Subtitle:  fmt.Sprintf("%d runs over %s; %s", len(s.Points), strings.Join(s.Keys, ", "), best),
		Generated: time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Sections: []section{
			{Title: "Runs, ranked", Text: "Ranked by best validation Sharpe; `dqnflow report RUN` gives each run's own report.", Table: t},
			{Title: "Effect of the grid", Table: eff, Figures: figs},
		},
	}
}
