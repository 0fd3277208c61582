package cli

import (
	"cmp"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/research/wfrun"
	"github.com/dqnflow/dqnflow/walkforward"
)

// studyFlags are the flags that say what a walk-forward study is, shared
// by "dqnflow walkforward" (in process) and "dqnflow walkforward start"
// (on Temporal).
type studyFlags struct {
	fs                          *pflag.FlagSet
	cfgPath, series, dataPath   *string
	epochs                      *int
	device                      *string
	step, test, valid, minTrain *string
	minShare                    *float64
	seeds                       *int
	leaveOut, gate              *string
	prior                       *int
	panel                       *bool
}

// addStudyFlags adds the study's flags to fs.
func addStudyFlags(fs *pflag.FlagSet) *studyFlags {
	f := &studyFlags{fs: fs}
	f.cfgPath = fs.String("config", "", "RunConfig JSON file (default: built-in defaults); its data.series (or data.path) names the series unless --series does")
	f.series = fs.String("series", "", "the series: 'GLOB[=INSTRUMENT],...', paths or globs of price files, each optionally with its env.instrument (default: the config's data.series, else data.path)")
	f.dataPath = fs.String("data", "", "one price file, bundled:NAME or synthetic, as the only series (instead of --series)")
	f.epochs = fs.Int("epochs", 0, "epochs per run (default: the config's epochs)")
	f.device = fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	flagValues(fs, "device", deviceValues...)
	blasFlag(fs)
	def := walkforward.DefaultLayout()
	f.step = fs.String("step", def.Step.String(), "how far each window's test block starts after the one before: N followed by y, mo, w or d")
	f.test = fs.String("test", def.Test.String(), "length of a test block")
	f.valid = fs.String("valid", def.Valid.String(), "length of the validation block before each test block")
	f.minTrain = fs.String("min-train", def.MinTrain.String(), "least training history a series needs before a window's validation block to take part (0: env.episode_bars+2 bars)")
	f.minShare = fs.Float64("min-share", def.MinShare, "least share of a block's average bars a series' validation and test blocks need to take part, in (0, 1]")
	f.seeds = fs.Int("seeds", 8, "runs per window, seeds config.seed, config.seed+1, …")
	f.leaveOut = fs.String("leave-out", "", "series left out of the agent's training and tested on: names ('GBPUSD_H4,AAPL'), or a share ('25%', '0.25') picked by a split seeded with config.seed")
	f.gate = fs.String("gate", walkforward.GateWindow, "what lets a run trade its test block: window (its validation t reaches backtest.min_valid_t, ADR 0016; else flat) or none (always)")
	flagValues(fs, "gate", walkforward.GateWindow, walkforward.GateNone)
	f.panel = fs.Bool("panel", false, "train one agent a seed on every training series of a window at once (their training ranges joined, market.JoinPanel; data.weighting draws the series), tested on every series (ADR 0037); default: one agent per training series")
	f.prior = fs.Int("prior-trials", 0, "agent configurations tried before this study on the same data (sweeps, earlier studies): the deflated Sharpe ratio counts them with this study's one")
	return f
}

// study is what the flags say: the study (its Source and Train left for
// the caller) and the paths typed on the command line (which the data
// roots let in, as a command's own arguments).
func (f *studyFlags) study() (st *walkforward.Study, typed []string, err error) {
	if *f.dataPath != "" && *f.series != "" {
		return nil, nil, fmt.Errorf("%w: --data and --series: give one", errUsage)
	}
	var cfg config.RunConfig
	cfg, err = loadConfig(f.fs, *f.cfgPath, *f.device, *f.dataPath, *f.epochs)
	if err != nil {
		return nil, nil, err
	}
	spec := cmp.Or(*f.series, cfg.Data.Series, cfg.Data.Path)
	series, err := prices.ParseSeries(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: --series: %v", errUsage, err)
	}
	if *f.series != "" || *f.dataPath != "" {
		for _, s := range series {
			typed = append(typed, s.Path)
		}
	}
	var l walkforward.Layout
	for _, p := range []struct {
		flag, v string
		dst     *walkforward.Period
	}{{"step", *f.step, &l.Step}, {"test", *f.test, &l.Test}, {"valid", *f.valid, &l.Valid}, {"min-train", *f.minTrain, &l.MinTrain}} {
		if *p.dst, err = walkforward.ParsePeriod(p.v); err != nil {
			return nil, nil, fmt.Errorf("%w: --%s: %v", errUsage, p.flag, err)
		}
	}
	if l.Step == (walkforward.Period{}) || l.Test == (walkforward.Period{}) || l.Valid == (walkforward.Period{}) {
		return nil, nil, fmt.Errorf("%w: --step %s, --test %s, --valid %s: each must be a positive period", errUsage, *f.step, *f.test, *f.valid)
	}
	l.MinShare = *f.minShare
	if *f.seeds < 1 {
		return nil, nil, fmt.Errorf("%w: --seeds %d: want at least 1", errUsage, *f.seeds)
	}
	names := make([]string, len(series))
	for i, s := range series {
		names[i] = s.Name
	}
	left, err := wfrun.ParseLeaveOut(*f.leaveOut, names, cfg.Seed)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: --leave-out %q: %v", errUsage, *f.leaveOut, err)
	}
	if *f.prior < 0 {
		return nil, nil, fmt.Errorf("%w: --prior-trials %d: must not be negative", errUsage, *f.prior)
	}
	return &walkforward.Study{Config: cfg, Series: series, Layout: l, Seeds: walkforward.SeedList(cfg.Seed, *f.seeds),
		LeaveOut: left, Gate: *f.gate, Panel: *f.panel, PriorTrials: *f.prior}, typed, nil
}
