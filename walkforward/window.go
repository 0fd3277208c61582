package walkforward

import (
	"context"
	"fmt"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
)

// Plan is the calendar of a study: its layout (defaults filled in), its
// windows and every series in every window (Output's Layout, Windows and
// Plan), as Run lays them.
type Plan struct {
	Layout  Layout         `json:"layout"`
	Windows []Window       `json:"windows"`
	Plan    []SeriesWindow `json:"plan"`
}

// laid is a study's calendar and what its windows are prepared from.
type laid struct {
	Plan
	bars  []*prices.Bars
	left  map[string]bool
	rules []sim.Rule
}

// lay checks s, loads every series' bars and lays the windows over
// them, as Run does.
func (s *Study) lay(ctx context.Context) (laid, error) {
	var l laid
	if err := s.check(); err != nil {
		return l, err
	}
	l.rules = s.Rules
	if l.rules == nil {
		l.rules = sim.Rules(sim.DefaultLookbacks)
	}
	l.left = map[string]bool{}
	for _, n := range s.LeaveOut {
		l.left[n] = true
	}
	l.bars = make([]*prices.Bars, len(s.Series))
	times := make([]SeriesTimes, len(s.Series))
	for i, sp := range s.Series {
		b, err := market.Load(ctx, s.Source, s.seriesConfig(sp))
		if err != nil {
			return l, fmt.Errorf("series %s: %w", sp.Name, err)
		}
		l.bars[i], times[i] = b, SeriesTimes{Name: sp.Name, Time: b.Time, First: firstBar(s.Config)}
	}
	lay := s.Layout
	lay.MinTrainBars = max(lay.MinTrainBars, s.Config.Env.EpisodeBars+2)
	ws, plan, err := Windows(times, lay)
	if err != nil {
		return l, err
	}
	l.Layout, l.Windows, l.Plan.Plan = lay.withDefaults(), ws, plan
	return l, nil
}

// Lay returns the study's calendar without running anything: the
// windows RunWindow takes the index of.
func (s *Study) Lay(ctx context.Context) (Plan, error) {
	l, err := s.lay(ctx)
	return l.Plan, err
}

// RunWindow runs window index of the study alone (as Run lays the
// windows): its baselines and its agent runs. Its Output is the study's
// header with that window only in Windows, Plan, Results, Timings and
// Notes; the outputs of every window, appended in window order, are
// Run's (Stopped and Seconds aside). Deadline is not looked at: a
// caller that runs windows one by one decides which to start.
func (s *Study) RunWindow(ctx context.Context, index int) (Output, error) {
	start := time.Now()
	out, log := s.header()
	l, err := s.lay(ctx)
	if err != nil {
		return out, err
	}
	if index < 0 || index >= len(l.Windows) {
		return out, fmt.Errorf("walk-forward: window %d: the study has windows 0 to %d", index, len(l.Windows)-1)
	}
	n := len(s.Series)
	w, row := l.Windows[index], l.Plan.Plan[index*n:(index+1)*n]
	out.Layout, out.Windows, out.Plan = l.Layout, []Window{w}, row
	st := s.prepareWindow(ctx, w, row, l.bars, l.left, l.rules)
	if st.err != nil {
		return out, st.err
	}
	res, tm, notes, err := s.runWindow(ctx, w, st, l.bars, l.left, out.Trials)
	if err != nil {
		return out, err
	}
	out.Results, out.Timings, out.Notes = res, tm, notes
	out.Seconds = time.Since(start).Seconds()
	fmt.Fprintf(log, "window %d (test %s to %s): %.2fs; %s\n", w.Index, w.TestFrom.Format(time.DateOnly), w.TestTo.Format(time.DateOnly),
		out.Seconds, PhaseTotals(tm))
	return out, nil
}
