package walkforward

import (
	"fmt"
	"math"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// SeriesTimes is what Windows reads of one series: its name, its bar
// times (increasing, UTC) and the index of its first usable bar, the
// first after the feature warmup (market.FeatureWarmup for a series whose
// features need that much history).
type SeriesTimes struct {
	Name  string
	Time  []time.Time
	First int
	// BarsPerYear turns a period into the bars it holds on average; 0
	// measures it from Time (prices.Bars.BarsPerYear).
	BarsPerYear float64
}

// Layout says how Windows lays the calendar out. The zero Layout takes
// the defaults (DefaultLayout).
type Layout struct {
	// Step is how far each window's test block starts after the one
	// before; Test the length of a test block and Valid of the
	// validation block before it. A Step shorter than Test makes test
	// blocks overlap.
	Step  Period `json:"step"`
	Test  Period `json:"test"`
	Valid Period `json:"valid"`
	// MinTrain is the least history a series must have before its
	// validation block to take part in a window: at least the bars
	// MinTrain holds on average, and at least MinTrainBars (a run needs
	// env.episode_bars+2).
	MinTrain     Period `json:"min_train"`
	MinTrainBars int    `json:"min_train_bars"`
	// MinShare is the least share of the bars a block's length holds on
	// average that a series' validation and test blocks must have for it
	// to take part: 0.25 takes a test year from three months of bars on
	// (the last, partial year of a file), and skips a series that starts
	// in its last quarter. In (0, 1].
	MinShare float64 `json:"min_share"`
}

// DefaultLayout is the study's calendar unless told otherwise: yearly
// test blocks rolled forward a year at a time, each after half a year
// of validation, on at least a year of training, and blocks with at
// least a quarter of their bars.
func DefaultLayout() Layout {
	return Layout{Step: Period{Years: 1}, Test: Period{Years: 1}, Valid: Period{Months: 6},
		MinTrain: Period{Years: 1}, MinTrainBars: 2, MinShare: 0.25}
}

// SeriesWindow is one series in one window: its bar ranges (indices into
// its bars) for training (from its first usable bar up to the window's
// ValidFrom), validation and test, or why it sits the window out.
type SeriesWindow struct {
	Window int          `json:"window"`
	Series string       `json:"series"`
	Train  market.Range `json:"train"`
	Valid  market.Range `json:"valid"`
	Test   market.Range `json:"test"`
	// Skip is "" when the series takes part in the window, else why not:
	// which block has too few bars.
	Skip string `json:"skip,omitempty"`
}

// Windows lays the calendar walk-forward over series. Test blocks start
// at T_k = A + k·Step, A the calendar boundary of Step (1 January for a
// step in years, the first of the month for months, midnight otherwise)
// at or before the earliest first usable bar of any series, for k = 0, 1,
// … while T_k is not after the last bar of every series. Window k
// validates on [T_k − Valid, T_k), tests on [T_k, T_k + Test) and trains
// each series on its bars from its first usable bar up to T_k − Valid
// (an expanding window). A series takes part in the window when its
// test and validation blocks each hold at least MinShare of the bars
// their length holds on average in that series, and its training at
// least MinTrain's bars and MinTrainBars; a window is in the study when
// at least one series takes part. Every window in the study lists every
// series, in the order given, with its ranges or the reason it sits out.
// Window.TrainFrom is the earliest first usable bar of the series that
// take part. Windows are numbered from 0 in calendar order.
func Windows(series []SeriesTimes, l Layout) ([]Window, []SeriesWindow, error) {
	l = l.withDefaults()
	if err := l.check(); err != nil {
		return nil, nil, err
	}
	if len(series) == 0 {
		return nil, nil, fmt.Errorf("walk-forward windows: no series")
	}
	var first, last time.Time
	bpy := make([]float64, len(series))
	for i, s := range series {
		n := len(s.Time)
		if s.First < 0 || s.First >= n {
			return nil, nil, fmt.Errorf("walk-forward windows: series %q has %d bars, none usable from bar %d on (the feature warmup)", s.Name, n, s.First)
		}
		if f := s.Time[s.First]; i == 0 || f.Before(first) {
			first = f
		}
		if e := s.Time[n-1]; i == 0 || e.After(last) {
			last = e
		}
		bpy[i] = s.BarsPerYear
		if bpy[i] == 0 {
			bpy[i] = (&prices.Bars{Time: s.Time, Close: make([]float64, n)}).BarsPerYear()
		}
		if !(bpy[i] > 0) || math.IsInf(bpy[i], 0) {
			return nil, nil, fmt.Errorf("walk-forward windows: series %q: %g bars a year; want a positive number (two bars at different times at least)", s.Name, bpy[i])
		}
	}
	anchor := l.Step.anchor(first)
	var ws []Window
	var sws []SeriesWindow
	for k := 0; ; k++ {
		tf := l.Step.Add(anchor, k)
		if tf.After(last) {
			break
		}
		if k > 1_000_000 {
			return nil, nil, fmt.Errorf("walk-forward windows: more than a million steps of %s from %s to %s", l.Step, anchor.Format(time.DateOnly), last.Format(time.DateOnly))
		}
		w := Window{Index: len(ws), ValidFrom: l.Valid.Add(tf, -1), TestFrom: tf, TestTo: l.Test.Add(tf, 1)}
		row := make([]SeriesWindow, len(series))
		in := false
		for i, s := range series {
			row[i] = l.place(s, bpy[i], w)
			if row[i].Skip == "" {
				if f := s.Time[s.First]; !in || f.Before(w.TrainFrom) {
					w.TrainFrom = f
				}
				in = true
			}
		}
		if in {
			ws = append(ws, w)
			sws = append(sws, row...)
		}
	}
	if len(ws) == 0 {
		return nil, nil, fmt.Errorf("walk-forward windows: no window from %s to %s has a series with enough bars to train (%s and %d bars at least), validate (%s) and test (%s, %g of the bars of each block at least)",
			first.Format(time.DateOnly), last.Format(time.DateOnly), l.MinTrain, l.MinTrainBars, l.Valid, l.Test, l.MinShare)
	}
	return ws, sws, nil
}

// place is series s in window w: its ranges and, when a block is short,
// why it sits out.
func (l Layout) place(s SeriesTimes, bpy float64, w Window) SeriesWindow {
	b := &prices.Bars{Time: s.Time}
	idx := func(t time.Time) int { return max(b.Index(t), s.First) }
	sw := SeriesWindow{Window: w.Index, Series: s.Name,
		Train: market.Range{From: s.First, To: idx(w.ValidFrom)},
		Valid: market.Range{From: idx(w.ValidFrom), To: idx(w.TestFrom)},
		Test:  market.Range{From: idx(w.TestFrom), To: idx(w.TestTo)},
	}
	span := func(from, to time.Time) string { return from.Format(time.DateOnly) + " to " + to.Format(time.DateOnly) }
	need := func(p Period) int { return max(2, int(math.Ceil(l.MinShare*bpy*p.InYears()))) }
	short := func(what string, r market.Range, p Period, from, to time.Time) string {
		return fmt.Sprintf("its %s block %s holds %d bars, fewer than the %d it needs (%g of the %.0f bars %s holds on average)",
			what, span(from, to), r.Len(), need(p), l.MinShare, bpy*p.InYears(), p)
	}
	needTrain := max(2, l.MinTrainBars, int(math.Ceil(bpy*l.MinTrain.InYears())))
	switch {
	case sw.Test.Len() < need(l.Test):
		sw.Skip = short("test", sw.Test, l.Test, w.TestFrom, w.TestTo)
	case sw.Valid.Len() < need(l.Valid):
		sw.Skip = short("validation", sw.Valid, l.Valid, w.ValidFrom, w.TestFrom)
	case sw.Train.Len() < needTrain:
		why := fmt.Sprintf("%d at least", l.MinTrainBars)
		if l.MinTrain != (Period{}) {
			why = fmt.Sprintf("the %.0f bars %s holds on average, and %d at least", bpy*l.MinTrain.InYears(), l.MinTrain, l.MinTrainBars)
		}
		sw.Skip = fmt.Sprintf("its training, from its first usable bar (%s) to %s, holds %d bars, fewer than the %d it needs (%s)",
			s.Time[s.First].Format(time.DateOnly), w.ValidFrom.Format(time.DateOnly), max(sw.Train.Len(), 0), needTrain, why)
	}
	return sw
}

// withDefaults fills the zero fields of l from DefaultLayout (MinTrain
// stays as given: zero is a valid minimum).
func (l Layout) withDefaults() Layout {
	d := DefaultLayout()
	if l.Step == (Period{}) {
		l.Step = d.Step
	}
	if l.Test == (Period{}) {
		l.Test = d.Test
	}
	if l.Valid == (Period{}) {
		l.Valid = d.Valid
	}
	if l.MinShare == 0 {
		l.MinShare = d.MinShare
	}
	return l
}

// check says which field of l is unusable.
func (l Layout) check() error {
	for _, p := range []struct {
		name string
		p    Period
	}{{"step", l.Step}, {"test", l.Test}, {"valid", l.Valid}, {"min_train", l.MinTrain}} {
		if p.p.Years < 0 || p.p.Months < 0 || p.p.Days < 0 {
			return fmt.Errorf("walk-forward layout %s %s: must not be negative", p.name, p.p)
		}
	}
	if !(l.MinShare > 0 && l.MinShare <= 1) {
		return fmt.Errorf("walk-forward layout min_share %g: want a share in (0, 1]", l.MinShare)
	}
	if l.MinTrainBars < 0 {
		return fmt.Errorf("walk-forward layout min_train_bars %d: must not be negative", l.MinTrainBars)
	}
	return nil
}
