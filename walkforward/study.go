package walkforward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
)

// Gates: what lets the agent trade a window's test block.
const (
	// GateWindow is ADR 0016's rule: a run whose chosen checkpoint's
	// validation t is below backtest.min_valid_t abstains and is flat.
	GateWindow = "window"
	// GateNone trades every checkpoint, whatever its evidence.
	GateNone = "none"
)

// DetailAbstained is the Detail of an agent's Result where its run
// abstained and the gate kept it flat.
const DetailAbstained = "abstained"

// Metadata keys the study adds to every run's checkpoint.
const (
	MetaWindow = "walkforward_window"
	MetaSeries = "walkforward_series"
	MetaTrials = "walkforward_trials"
)

// Study is a calendar walk-forward over a set of series: per window, the
// baselines on every series that takes part, and the agent, one run per
// seed, trained on the window's training ranges and backtested on every
// series' test block.
type Study struct {
	// Config is the agent's run config; its data.path and data.series
	// are replaced by Series', its data ranges by each window's.
	Config config.RunConfig
	Series []prices.SeriesSpec
	Source prices.Source
	Layout Layout
	Seeds  []uint64
	// LeaveOut names series the agent does not train on; it is tested on
	// them too (Result.InTraining false).
	LeaveOut []string
	// Gate is GateWindow (the default) or GateNone.
	Gate  string
	Train Trainer
	// Panel says that Train takes every training series of a window in
	// one run (LocalTrainer joins them, market.JoinPanel), tested on
	// every series' test block, the left-out ones included (the
	// checkpoint's checkpoint.MetaPanel names the training series). Without it each training series gets
	// its own runs, tested on its own test block, and the series left
	// out are tested with the runs of the first training series of the
	// window (Result.Note says which).
	Panel bool
	// Rules are the family the best simple rule is chosen from on
	// validation; nil: sim.Rules(sim.DefaultLookbacks).
	Rules []sim.Rule
	// PriorTrials is the number of agent configurations tried before
	// this study on the same data (earlier studies, sweeps), which the
	// deflated Sharpe ratio must count.
	PriorTrials int
	// Dir, when not "", is where each run's chosen checkpoint goes:
	// Dir/window-N/SERIES/seed-S.safetensors (Dir/window-N/panel/… for
	// a panel).
	Dir string
	// Log takes a line per window with its timings, and the trainer's.
	Log io.Writer
	// Deadline, when not zero, is when the study must end: it starts no
	// window it expects to end after it (a window is expected to take as
	// long as the one before), and the windows done are its Output, with
	// Stopped saying so. A study whose context is cancelled (Ctrl-C, a
	// SIGTERM) returns the windows done likewise, with ErrInterrupted.
	Deadline time.Time
}

// ErrInterrupted is the error of a study whose context was cancelled
// between or inside windows: its Output holds the windows that ended.
var ErrInterrupted = errors.New("walk-forward interrupted")

// Trials is the number of agent configurations the study's figures were
// chosen among, for the deflated Sharpe ratio: the study's own (one
// config; seeds are repetitions of it, not trials) plus those tried
// before it (Study.PriorTrials).
type Trials struct {
	Study int `json:"study"`
	Prior int `json:"prior"`
	Total int `json:"total"`
}

// Timing is the wall time one phase of one window took: "prepare"
// (loading and splitting the datasets), "baselines", "train" (every run
// of the window) or "backtest" (the agent's test backtests), with the
// number of datasets, runs or backtests. A window's prepare and baselines
// run while the window before it trains, so a window's phases may sum to
// more than the time it added to the study.
type Timing struct {
	Window  int     `json:"window"`
	Phase   string  `json:"phase"`
	Seconds float64 `json:"seconds"`
	Count   int     `json:"count"`
}

// Output is everything a study produced: what `dqnflow walkforward`
// writes as results.json.
type Output struct {
	Config   config.RunConfig    `json:"config"`
	Series   []prices.SeriesSpec `json:"series"`
	Layout   Layout              `json:"layout"`
	Seeds    []uint64            `json:"seeds"`
	LeaveOut []string            `json:"leave_out"`
	Gate     string              `json:"gate"`
	Panel    bool                `json:"panel"`
	Trials   Trials              `json:"trials"`
	Windows  []Window            `json:"windows"`
	// Plan is every series in every window: its ranges or why it sits
	// the window out.
	Plan    []SeriesWindow `json:"plan"`
	Results []Result       `json:"results,omitempty"`
	// Notes says what the study could not do (a window whose series are
	// all left out has no agent).
	Notes []string `json:"notes,omitempty"`
	// Stopped, when not "", says why the study ended before its last
	// window (Study.Deadline, an interruption); Windows and Plan then hold
	// only the windows that ran.
	Stopped string   `json:"stopped,omitempty"`
	Timings []Timing `json:"timings"`
	Seconds float64  `json:"seconds"`
	// Device is what trained the runs (set by the caller that opened the
	// backend).
	Device string `json:"device,omitempty"`
}

// Trials is s's count of configurations tried.
func (s *Study) Trials() Trials {
	return Trials{Study: 1, Prior: s.PriorTrials, Total: 1 + s.PriorTrials}
}

// header is the Output of s before any window has run, and the writer
// its log lines go to.
func (s *Study) header() (Output, io.Writer) {
	log := s.Log
	if log == nil {
		log = io.Discard
	}
	out := Output{Config: s.Config, Series: s.Series, Seeds: s.Seeds, LeaveOut: s.LeaveOut, Gate: s.Gate, Panel: s.Panel, Trials: s.Trials()}
	if out.Gate == "" {
		out.Gate = GateWindow
	}
	return out, log
}

// Run runs the study. Every error names the window, the series and the
// step.
func (s *Study) Run(ctx context.Context) (Output, error) {
	start := time.Now()
	out, log := s.header()
	// The bars of every series, for the calendar; each window's Dataset
	// is prepared from the config as a run's is (market.Prepare).
	lt, err := s.lay(ctx)
	if err != nil {
		return out, err
	}
	bars, left, rules, ws, plan := lt.bars, lt.left, lt.rules, lt.Windows, lt.Plan.Plan
	out.Layout, out.Windows, out.Plan = lt.Layout, ws, plan
	fmt.Fprintf(log, "walk-forward: %d series, %d windows (tests from %s to %s), %d seeds, gate %s, %d configuration(s) tried in all\n",
		len(s.Series), len(ws), ws[0].TestFrom.Format(time.DateOnly), ws[len(ws)-1].TestTo.Format(time.DateOnly), len(s.Seeds), out.Gate, out.Trials.Total)
	// Window k+1's datasets and baselines (CPU work) are made while
	// window k's runs train (on the GPU, when there is one).
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	row := func(wi int) []SeriesWindow { return plan[wi*len(s.Series) : (wi+1)*len(s.Series)] }
	start1 := func(wi int) chan stage1 {
		ch := make(chan stage1, 1)
		go func() { ch <- s.prepareWindow(ctx, ws[wi], row(wi), bars, left, rules) }()
		return ch
	}
	// stop ends the study after its first done windows.
	stop := func(done int, why string) {
		out.Windows, out.Plan = ws[:done], plan[:done*len(s.Series)]
		out.Stopped = fmt.Sprintf("%s after %d of %d windows (tests to %s); windows %d to %d did not run",
			why, done, len(ws), ws[max(done-1, 0)].TestTo.Format(time.DateOnly), done, len(ws)-1)
		out.Notes = append(out.Notes, out.Stopped)
		out.Seconds = time.Since(start).Seconds()
		fmt.Fprintf(log, "walk-forward: %s; %.2fs in all; %s\n", out.Stopped, out.Seconds, PhaseTotals(out.Timings))
	}
	next := start1(0)
	var last time.Duration // the previous window's wall time
	for wi, w := range ws {
		if !s.Deadline.IsZero() && wi > 0 && time.Now().Add(last).After(s.Deadline) {
			stop(wi, fmt.Sprintf("stopped at the deadline %s", s.Deadline.UTC().Format(time.TimeOnly)))
			return out, nil
		}
		t0 := time.Now()
		st := <-next
		if st.err != nil {
			if parent.Err() != nil {
				stop(wi, "interrupted")
				return out, fmt.Errorf("%w: %w", ErrInterrupted, parent.Err())
			}
			return out, st.err
		}
		if wi+1 < len(ws) {
			next = start1(wi + 1)
		}
		res, tm, notes, err := s.runWindow(ctx, w, st, bars, left, out.Trials)
		if err != nil {
			if parent.Err() != nil {
				stop(wi, "interrupted")
				return out, fmt.Errorf("%w: %w", ErrInterrupted, parent.Err())
			}
			return out, err
		}
		last = time.Since(t0)
		row := row(wi)
		out.Results, out.Timings, out.Notes = append(out.Results, res...), append(out.Timings, tm...), append(out.Notes, notes...)
		in := 0
		for _, sw := range row {
			if sw.Skip == "" {
				in++
			}
		}
		var parts []string
		for _, t := range tm {
			parts = append(parts, fmt.Sprintf("%s %.2fs (%d)", t.Phase, t.Seconds, t.Count))
		}
		fmt.Fprintf(log, "window %d (test %s to %s, %d of %d series): %s\n", w.Index, w.TestFrom.Format(time.DateOnly), w.TestTo.Format(time.DateOnly),
			in, len(s.Series), strings.Join(parts, ", "))
	}
	out.Seconds = time.Since(start).Seconds()
	fmt.Fprintf(log, "walk-forward: %.2fs in all; %s\n", out.Seconds, PhaseTotals(out.Timings))
	return out, nil
}

// PhaseTotals sums timings over windows by phase: "prepare 1.20s (30),
// baselines …, train 80.00s (240 runs, 0.333s each), backtest …".
func PhaseTotals(ts []Timing) string {
	var order []string
	sum := map[string]*Timing{}
	for _, t := range ts {
		if sum[t.Phase] == nil {
			order = append(order, t.Phase)
			sum[t.Phase] = &Timing{Phase: t.Phase}
		}
		sum[t.Phase].Seconds += t.Seconds
		sum[t.Phase].Count += t.Count
	}
	var parts []string
	for _, p := range order {
		t := sum[p]
		each := ""
		if t.Count > 0 {
			each = fmt.Sprintf(", %.3fs each", t.Seconds/float64(t.Count))
		}
		parts = append(parts, fmt.Sprintf("%s %.2fs (%d%s)", p, t.Seconds, t.Count, each))
	}
	return strings.Join(parts, ", ")
}

// part is one series taking part in a window: its Dataset, its test
// block's benchmarks and its baselines' results.
type part struct {
	i     int // index in Study.Series
	sw    SeriesWindow
	ds    *market.Dataset
	bench *sim.Benchmarks // the test block's
	base  []Result
}

// stage1 is a window's datasets and baselines, and their timings.
type stage1 struct {
	parts   []*part
	timings map[string]*Timing
	err     error
}

// windowPhases are the phases of a window's Timings, in order.
var windowPhases = []string{"prepare", "baselines", "train", "backtest"}

// clock runs f and adds its time and n to phase p of tm.
func clock(tm map[string]*Timing, p string, n int, f func() error) error {
	t0 := time.Now()
	err := f()
	tm[p].Seconds += time.Since(t0).Seconds()
	tm[p].Count += n
	return err
}

// prepareWindow makes the datasets and runs the baselines of window w,
// the series in parallel.
func (s *Study) prepareWindow(ctx context.Context, w Window, row []SeriesWindow, bars []*prices.Bars, left map[string]bool, rules []sim.Rule) stage1 {
	st := stage1{timings: map[string]*Timing{}}
	for _, p := range windowPhases {
		st.timings[p] = &Timing{Window: w.Index, Phase: p}
	}
	for i, sw := range row {
		if sw.Skip == "" {
			st.parts = append(st.parts, &part{i: i, sw: sw})
		}
	}
	parts := st.parts
	st.err = clock(st.timings, "prepare", len(parts), func() error {
		return parallel(ctx, len(parts), func(k int) error {
			p := parts[k]
			var err error
			if p.ds, err = market.Prepare(ctx, s.Source, windowConfig(s.seriesConfig(s.Series[p.i]), bars[p.i], p.sw)); err != nil {
				return fmt.Errorf("window %d, %s: prepare: %w", w.Index, p.sw.Series, err)
			}
			if err := sameRanges(p.ds, p.sw); err != nil {
				return err
			}
			if p.bench, err = sim.NewBenchmarks(p.ds, p.ds.Test); err != nil {
				return fmt.Errorf("window %d, %s: test benchmarks: %w", w.Index, p.sw.Series, err)
			}
			return nil
		})
	})
	if st.err != nil {
		return st
	}
	st.err = clock(st.timings, "baselines", len(parts), func() error {
		return parallel(ctx, len(parts), func(k int) error {
			p := parts[k]
			var err error
			p.base, err = Baselines(p.ds, p.sw, rules, !left[p.sw.Series], p.bench)
			return err
		})
	})
	return st
}

// runWindow trains the agent's runs of window w (one after the other) on
// the datasets of st and backtests them on the series' test blocks (in
// parallel); its results follow the baselines'.
func (s *Study) runWindow(ctx context.Context, w Window, st stage1, bars []*prices.Bars, left map[string]bool, trials Trials) ([]Result, []Timing, []string, error) {
	var notes []string
	parts, timing := st.parts, st.timings
	timeIt := func(p string, n int, f func() error) error { return clock(timing, p, n, f) }
	var res []Result
	var training, heldOut []*part
	for _, p := range parts {
		res = append(res, p.base...)
		if left[p.sw.Series] {
			heldOut = append(heldOut, p)
		} else {
			training = append(training, p)
		}
	}
	if len(training) == 0 {
		notes = append(notes, fmt.Sprintf("window %d: every series that takes part is left out of training: no agent", w.Index))
	}
	// groups are the runs' training sets and the series each is tested
	// on: one group of every training series for a panel; else one a
	// training series, the first also testing the series left out.
	type group struct {
		train, test []*part
		dir, note   string
	}
	var groups []group
	switch {
	case len(training) == 0:
	case s.Panel:
		groups = []group{{train: training, test: parts, dir: "panel"}}
	default:
		for k, p := range training {
			g := group{train: []*part{p}, test: []*part{p}, dir: p.sw.Series}
			if k == 0 {
				g.test = append(g.test, heldOut...)
				g.note = "trained on " + p.sw.Series
			}
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		names := make([]string, len(g.train))
		data := make([]*market.Dataset, len(g.train))
		for k, p := range g.train {
			names[k], data[k] = p.sw.Series, p.ds
		}
		cfg := windowConfig(s.seriesConfig(s.Series[g.train[0].i]), bars[g.train[0].i], g.train[0].sw)
		if len(g.train) > 1 {
			cfg = s.panelConfig(w, names)
		}
		for _, seed := range s.Seeds {
			req := TrainRequest{Config: cfg, Seed: seed, Window: w, Series: names, Data: data, Meta: map[string]string{
				MetaWindow: strconv.Itoa(w.Index), MetaSeries: strings.Join(names, ","), MetaTrials: strconv.Itoa(trials.Total)}}
			if s.Dir != "" {
				req.Dir = filepath.Join(s.Dir, fmt.Sprintf("window-%d", w.Index), g.dir)
			}
			var ag Agent
			err := timeIt("train", 1, func() error {
				var err error
				ag, err = s.Train(ctx, req)
				return err
			})
			if err != nil {
				return nil, nil, nil, fmt.Errorf("window %d, %v, seed %d: train: %w", w.Index, names, seed, err)
			}
			out := make([]Result, len(g.test))
			err = timeIt("backtest", len(g.test), func() error {
				return parallel(ctx, len(g.test), func(k int) error {
					p := g.test[k]
					pol := ag.Policy
					if k > 0 && ag.Clone != nil {
						var err error
						if pol, err = ag.Clone(); err != nil {
							return err
						}
					} else if k > 0 {
						return fmt.Errorf("agent without Clone tested on %d series at once", len(g.test))
					}
					r, err := s.agentResult(ag, pol, p.ds, p.bench, p.sw, seed, !left[p.sw.Series])
					if err != nil {
						return fmt.Errorf("window %d, %s, seed %d: %w", w.Index, p.sw.Series, seed, err)
					}
					if left[p.sw.Series] && g.note != "" {
						r.Note = strings.TrimPrefix(r.Note+"; "+g.note, "; ")
					}
					out[k] = r
					return nil
				})
			})
			if err != nil {
				return nil, nil, nil, err
			}
			res = append(res, out...)
		}
	}
	var tm []Timing
	for _, p := range windowPhases {
		tm = append(tm, *timing[p])
	}
	return res, tm, notes, nil
}

// parallel runs f(0) … f(n−1) on up to GOMAXPROCS goroutines and returns
// the error of the lowest index that failed (so that the error does not
// depend on the schedule), after all have finished.
func parallel(ctx context.Context, n int, f func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// agentResult backtests agent ag (its policy pol, one goroutine's own) on
// the test block of ds (bench: its benchmarks): its checkpoint, or flat
// where the gate makes it abstain (Detail DetailAbstained, Note the
// evidence and the checkpoint's own test Sharpe).
func (s *Study) agentResult(ag Agent, pol Backtester, ds *market.Dataset, bench *sim.Benchmarks, sw SeriesWindow, seed uint64, inTraining bool) (Result, error) {
	id := Result{Window: sw.Window, Series: sw.Series, Strategy: StrategyAgent, Seed: seed, InTraining: inTraining,
		ValidSharpe: ag.ValidSharpe, ValidT: ag.ValidT}
	rep, err := pol.Backtest(ds, ds.Test, bench)
	if err != nil {
		return id, fmt.Errorf("agent test backtest: %w", err)
	}
	if ag.Abstained && s.Gate != GateNone {
		ck := rep
		if rep, err = sim.BacktestWith(ds, ds.Test, Flat(), bench); err != nil {
			return id, fmt.Errorf("flat test backtest: %w", err)
		}
		id.Detail = DetailAbstained
		id.Note = fmt.Sprintf("validation t %.2f below backtest.min_valid_t %g: flat; the checkpoint's own test Sharpe (bar returns) %.3f",
			ag.ValidT, s.Config.Backtest.MinValidT, ck.Sharpe)
	}
	return NewResult(id, ds, ds.Test, rep)
}

// check says what in s is unusable before anything runs.
func (s *Study) check() error {
	switch {
	case len(s.Series) == 0:
		return fmt.Errorf("walk-forward: no series")
	case len(s.Seeds) == 0:
		return fmt.Errorf("walk-forward: no seeds")
	case s.Train == nil:
		return fmt.Errorf("walk-forward: no trainer")
	case s.Gate != "" && s.Gate != GateWindow && s.Gate != GateNone:
		return fmt.Errorf("walk-forward: gate %q: want %s or %s", s.Gate, GateWindow, GateNone)
	case s.PriorTrials < 0:
		return fmt.Errorf("walk-forward: prior trials %d: must not be negative", s.PriorTrials)
	}
	seen := map[uint64]bool{}
	for _, sd := range s.Seeds {
		if seen[sd] {
			return fmt.Errorf("walk-forward: seed %d listed twice", sd)
		}
		seen[sd] = true
	}
	names := map[string]bool{}
	for _, sp := range s.Series {
		names[sp.Name] = true
	}
	for _, n := range s.LeaveOut {
		if !names[n] {
			return fmt.Errorf("walk-forward: left-out series %q is not one of the study's", n)
		}
	}
	if len(s.LeaveOut) >= len(s.Series) {
		return fmt.Errorf("walk-forward: every series (%d) is left out: the agent has nothing to train on", len(s.Series))
	}
	return nil
}

// seriesConfig is the study's config on series sp alone.
func (s *Study) seriesConfig(sp prices.SeriesSpec) config.RunConfig {
	return market.SeriesConfig(s.Config, sp)
}

// panelConfig is the study's config on the training series names of
// window w: data.series and the window's calendar dates.
func (s *Study) panelConfig(w Window, names []string) config.RunConfig {
	c := s.Config
	var entries []string
	for _, n := range names {
		for _, sp := range s.Series {
			if sp.Name == n {
				e := sp.Path
				if sp.Instrument != "" {
					e += "=" + sp.Instrument
				}
				entries = append(entries, e)
			}
		}
	}
	d := &c.Data
	d.Path, d.Series = "", strings.Join(entries, ",")
	d.ValidBars, d.TrainBars, d.TestBars = 0, 0, 0
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	d.TrainFrom, d.TrainTo = "", at(w.ValidFrom)
	d.ValidFrom, d.ValidTo = at(w.ValidFrom), at(w.TestFrom)
	d.TestFrom, d.TestTo = at(w.TestFrom), at(w.TestTo)
	return c
}

// windowConfig is cfg (one series, bars b) with the data ranges of sw
// given by bar times, so that Prepare splits the bars exactly as Windows
// did.
func windowConfig(cfg config.RunConfig, b *prices.Bars, sw SeriesWindow) config.RunConfig {
	at := func(i int) string { return b.Time[i].UTC().Format(time.RFC3339Nano) }
	d := &cfg.Data
	d.ValidBars, d.TrainBars, d.TestBars = 0, 0, 0
	d.TrainFrom, d.TrainTo = at(sw.Train.From), at(sw.Valid.From)
	d.ValidFrom, d.ValidTo = at(sw.Valid.From), at(sw.Test.From)
	d.TestFrom, d.TestTo = at(sw.Test.From), ""
	if sw.Test.To < b.Len() {
		d.TestTo = at(sw.Test.To)
	}
	return cfg
}

// SeedList is seeds first, first+1, …: n of them.
func SeedList(first uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = first + uint64(i)
	}
	return out
}

// LeaveOutSplit picks a share frac of names to leave out, by a seeded
// shuffle (the same seed and names give the same split), at least one
// and never all when frac > 0; in the order of names.
func LeaveOutSplit(names []string, frac float64, seed uint64) []string {
	if frac <= 0 || len(names) < 2 {
		return nil
	}
	k := min(len(names)-1, max(1, int(frac*float64(len(names))+0.5)))
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	// splitmix64 drives a Fisher–Yates shuffle.
	x := seed
	next := func() uint64 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	for i := len(idx) - 1; i > 0; i-- {
		j := int(next() % uint64(i+1))
		idx[i], idx[j] = idx[j], idx[i]
	}
	pick := slices.Clone(idx[:k])
	slices.Sort(pick)
	out := make([]string, k)
	for i, p := range pick {
		out[i] = names[p]
	}
	return out
}

// firstBar is the first bar a range of a series may start at under cfg,
// as market.Prepare splits it: after the feature warmup, and with causal
// normalisation after its burn-in too (market.CausalBurnIn, ADR 0039).
func firstBar(cfg config.RunConfig) int {
	if cfg.Data.Normalize == config.NormalizeCausal {
		return market.FeatureWarmup + market.CausalBurnIn
	}
	return market.FeatureWarmup
}
