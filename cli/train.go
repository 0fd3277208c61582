package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/epochloop"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// trainCmd is "dqnflow train": the whole training loop in this process,
// without Temporal (the TrainingRun workflow runs the same steps as
// activities).
func trainCmd(e *env) *cobra.Command {
	cmd := leaf("train", "train a run in this process, without Temporal",
		"train trains a run in this process, without Temporal: it backtests on the validation range every backtest.every epochs, "+
			"keeps the best checkpoint, and reports it on the held-out test range. Progress goes to stderr, the report to stdout.",
		"dqnflow train --device cpu --epochs 5 --out runs/local",
		"dqnflow train --device cuda --config my.json --data prices.csv --out runs/gpu",
		"dqnflow train --device cpu --series 'corpus/EURUSD_H4.csv,corpus/USDJPY_H4.csv' --out runs/panel   # one agent on a panel (data.series)")
	fs := cmd.Flags()
	device := fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	series := fs.String("series", "", "train one agent on a panel: data.series entries (files or globs, comma-separated, each optionally =INSTRUMENT) in place of data.path")
	epochs := fs.Int("epochs", 0, "number of epochs (default: the config's epochs)")
	blasFlag(fs)
	out := fs.String("out", "", "directory for checkpoints and the final report (default: runs/<run id>, a new one per run)")
	jsonOut := fs.Bool("json", false, "print the final report (best checkpoint on validation and test) as JSON")
	flagValues(fs, "device", deviceValues...)
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *dataPath != "" && *series != "" {
			return fmt.Errorf("%w: --data and --series: give one", errUsage)
		}
		typed := []string{*dataPath}
		if *series != "" {
			specs, err := prices.ParseSeries(*series)
			if err != nil {
				return fmt.Errorf("%w: --series: %v", errUsage, err)
			}
			for _, sp := range specs {
				typed = append(typed, sp.Path)
			}
		}
		src, err := df.source(typed...)
		if err != nil {
			return err
		}
		cfg, err := loadConfig(fs, *cfgPath, *device, *dataPath, *epochs)
		if err != nil {
			return err
		}
		switch {
		case *series != "":
			cfg.Data.Path, cfg.Data.Series = "", *series
		case *dataPath != "":
			cfg.Data.Series = "" // --data names one series
		}
		res, err := trainLocal(cmd.Context(), e, src, cfg, *out, "")
		if err != nil {
			return err
		}
		if *jsonOut {
			return printJSON(e, res)
		}
		printTrainResult(e, res)
		return nil
	}
	return cmd
}

// blasFlag adds --blas, which loadConfig applies to the config's blas.
func blasFlag(fs *pflag.FlagSet) {
	fs.String("blas", "", "CPU matrix library: auto, gonum, openblas or accelerate (default: the config's blas, auto)")
	flagValues(fs, "blas", blasValues...)
}

// blasValues are what --blas takes; precisionValues what --precision takes.
var (
	blasValues      = []string{"auto", "gonum", "openblas", "accelerate"}
	precisionValues = []string{config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16}
)

// loadConfig reads the config file and applies the flags that override it;
// the result is validated, so a bad flag is named like a bad config key.
func loadConfig(fs *pflag.FlagSet, path, device, dataPath string, epochs int) (config.RunConfig, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	if set["device"] {
		cfg.Device = device
	}
	if set["data"] {
		cfg.Data.Path = dataPath
	}
	if set["epochs"] {
		cfg.Epochs = epochs
	}
	if set["blas"] {
		cfg.BLAS = fs.Lookup("blas").Value.String()
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%w (after applying flags)", err)
	}
	return cfg, nil
}

// trainResult is what a local training run ends with: the checkpoint that
// validation picked, its validation report and, when the data has a test
// range, its report on that held-out range, which nothing else touched.
type trainResult struct {
	RunID      string       `json:"run_id"`
	Info       trainer.Info `json:"trainer"`
	Epochs     int          `json:"epochs"`     // epochs trained
	EarlyStop  bool         `json:"early_stop"` // stopped by backtest.patience
	BestEpoch  int          `json:"best_epoch"` // highest validation Sharpe
	Checkpoint string       `json:"checkpoint"` // its file
	Valid      sim.Report   `json:"validation"`
	// ValidT is the t-statistic of the chosen checkpoint's validation
	// Sharpe (sim.Report.SharpeT). Abstained is set when it is below
	// backtest.min_valid_t: the run found no edge it can vouch for and
	// recommends flat.
	ValidT    float64 `json:"validation_sharpe_t"`
	Abstained bool    `json:"abstained"`
	// Test is the run's report on the test range, nil when the config
	// holds none out (data.test_fraction 0): the chosen checkpoint's
	// backtest, or flat's when the run abstained. CheckpointTest is the
	// chosen checkpoint's own test backtest, also when the run abstained.
	Test           *sim.Report `json:"test,omitempty"`
	CheckpointTest *sim.Report `json:"checkpoint_test,omitempty"`
	// FlatTest is flat's report on the test range (what an abstaining run
	// reports), for callers that gate the checkpoint themselves.
	FlatTest *sim.Report `json:"-"`
	// Series, for a run on a panel (data.series), are the chosen
	// checkpoint's reports on each series' own validation and test ranges;
	// Valid, Test and CheckpointTest are then their equal-risk portfolio's
	// (sim.PanelScore.Report: its Sharpe the portfolio's daily Sharpe
	// ratio) and ValidT that portfolio's t-statistic.
	Series []seriesResult `json:"series,omitempty"`
}

// seriesResult is the chosen checkpoint of a panel run on one series.
type seriesResult struct {
	Name   string      `json:"name"`
	Path   string      `json:"path"`
	SHA256 string      `json:"sha256,omitempty"`
	Valid  sim.Report  `json:"validation"`
	Test   *sim.Report `json:"test,omitempty"`
}

// flatPolicy stays flat: what a run that abstains recommends.
type flatPolicy struct{}

// Act returns flat.
func (flatPolicy) Act(int, []float32) market.Action { return market.Action{Dir: model.FlatDir} }

// flatTest is flat's backtest of ds's test range: the report of a run that
// abstains.
func flatTest(ds *market.Dataset) (sim.Report, error) {
	rep, err := sim.Backtest(ds, ds.Test, flatPolicy{})
	if err != nil {
		return rep, fmt.Errorf("test backtest of flat: %w", err)
	}
	return rep, nil
}

// loadPolicy reads the checkpoint file at path and loads its greedy policy.
func loadPolicy(ctx context.Context, e *env, path string) (*policy.Policy, error) {
	ck, _, err := readCheckpoint(ctx, e, path)
	if err != nil {
		return nil, err
	}
	pol, err := policy.Load(ck)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return pol, nil
}

// Final is the report the run is judged by: the test range when there is
// one (flat's when the run abstained), else validation (which also picked
// the checkpoint, so it is biased upwards).
func (r trainResult) Final() sim.Report {
	if r.Test != nil {
		return *r.Test
	}
	return r.Valid
}

// trainLocal trains cfg in this process as run runID (a new id when empty)
// and writes checkpoints and the final report (report.json) under out
// (runs/<run id> when empty). Every backtest.every epochs the online
// network runs on the validation range; the epoch with the best
// validation Sharpe is checkpointed (and kept), and after backtest.patience
// backtests without a better one training stops. The chosen checkpoint
// then runs once on the test range. src reads the data; progress goes to
// e.stderr.
//
// With data.series the run trains on a panel (market.PreparePanel: each
// series prepared alone, their training ranges joined) and validates as
// the walk-forward study's panel runs do: on the equal-risk portfolio of
// the validation backtests of every series (sim.PanelValidation), its
// daily Sharpe ratio picking the epoch and its t-statistic gating the
// recommendation. Its checkpoints record the panel (trainer.PanelMeta:
// the series' files, their SHA-256 and ranges), and the test report is
// the portfolio's of the series' test ranges, with each series' own.
func trainLocal(ctx context.Context, e *env, src prices.Source, cfg config.RunConfig, out, runID string) (trainResult, error) {
	var res trainResult
	b, _, err := openBackend(e, cfg.Device)
	if err != nil {
		return res, err
	}
	ds, pn, err := prepareRun(ctx, e, src, cfg)
	if err != nil {
		return res, err
	}
	var panelMeta map[string]string
	if pn != nil {
		if panelMeta, err = trainer.PanelMeta(pn); err != nil {
			return res, err
		}
	}
	tr, err := b.New(ctx, cfg, ds, nil)
	if err != nil {
		return res, err
	}
	defer tr.Close()
	res.Info = tr.Info()
	info := res.Info
	fmt.Fprintf(e.stderr, "trainer: %s on %s, precision %s (GEMM operands %s, state %s, compute %s), %d parameters\n",
		info.Backend, info.Device, info.Precision, info.StorageDType, info.StateDType, info.ComputeDType, info.Parameters)
	if w := precisionWarning(cfg); w != "" {
		fmt.Fprintln(e.stderr, w)
	}
	if runID == "" {
		runID = newRunID("local")
	}
	res.RunID = runID
	if out == "" {
		out = filepath.Join("runs", runID)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return res, fmt.Errorf("create output directory: %w", err)
	}
	fmt.Fprintf(e.stderr, "run %s: checkpoints and report in %s\n", runID, out)
	loop := &epochloop.Loop[string]{Config: cfg}
	steps := &localSteps{e: e, tr: tr, cfg: cfg, ds: ds, pn: pn, out: out, runID: runID, panelMeta: panelMeta, res: &res, loop: loop}
	if _, err := loop.Run(ctx, 0, cfg.Epochs, steps); err != nil {
		return res, err
	}
	if res.BestEpoch > 0 && cfg.Backtest.NoEdge(res.ValidT) {
		res.Abstained = true
		fmt.Fprintf(e.stderr, "no edge: the best validation Sharpe, %.3f at epoch %d, has t = %.2f over %.2f years, below backtest.min_valid_t = %g; the run recommends flat (ADR 0016)\n",
			res.Valid.Sharpe, res.BestEpoch, res.ValidT, float64(res.Valid.Bars-1)/res.Valid.BarsPerYear, cfg.Backtest.MinValidT)
	}
	if res.BestEpoch > 0 {
		rec := checkpoint.NewRecommendation(res.Valid.Sharpe, res.ValidT, cfg.Backtest.MinValidT, res.Abstained)
		if err := recordRecommendation(ctx, e, res.Checkpoint, rec); err != nil {
			return res, err
		}
	}
	if pn != nil {
		if err := panelTest(ctx, e, pn, &res); err != nil {
			return res, err
		}
	} else if ds.Test.Len() >= 2 {
		pol, err := loadPolicy(ctx, e, res.Checkpoint)
		if err != nil {
			return res, err
		}
		rep, err := pol.Backtest(ds, ds.Test)
		if err != nil {
			return res, fmt.Errorf("test backtest of %s: %w", res.Checkpoint, err)
		}
		flat, err := flatTest(ds)
		if err != nil {
			return res, err
		}
		res.Test, res.CheckpointTest, res.FlatTest = &rep, &rep, &flat
		if res.Abstained {
			res.Test = &flat
		}
	}
	return res, writeJSONFile(filepath.Join(out, "report.json"), res)
}

// localSteps are the steps of trainLocal's epochs (epochloop.Steps): a
// progress bar while an epoch trains, checkpoint files in out, and on
// e.stderr, once the epoch is done, its cadence checkpoint and its
// validation backtest. The loop checkpoints the best epoch and stops at
// the patience; res follows the best epoch (its checkpoint, validation
// report and t-statistic). The epoch the patience runs out at is not
// checkpointed unless the cadence asks: the run's result is its best
// checkpoint.
type localSteps struct {
	e         *env
	tr        trainer.Trainer
	cfg       config.RunConfig
	ds        *market.Dataset
	pn        *market.Panel
	out       string
	runID     string
	panelMeta map[string]string
	res       *trainResult
	loop      *epochloop.Loop[string]

	// The epoch in progress: its checkpoint (ckDue: asked by the
	// cadence) and its validation backtest.
	ckPath string
	ckDue  bool
	rep    sim.Report
	validT float64
	parts  []sim.Report
}

func (s *localSteps) Train(ctx context.Context, epoch int) (epochloop.Trained, error) {
	s.ckPath, s.ckDue = "", false
	if _, err := s.tr.Collect(ctx, s.cfg.Env.CollectSteps); err != nil {
		return epochloop.Trained{}, fmt.Errorf("epoch %d: collect: %w", epoch, err)
	}
	bar := newProgressBar(s.e.stderr, fmt.Sprintf("epoch %d/%d", epoch, s.cfg.Epochs), s.cfg.StepsPerEpoch)
	st, err := s.tr.Train(ctx, s.cfg.StepsPerEpoch, func(p trainer.Progress) {
		bar.Update(p.Step, fmt.Sprintf("loss %.4f", p.Loss))
	})
	if err != nil {
		return epochloop.Trained{}, fmt.Errorf("epoch %d: train: %w", epoch, err)
	}
	if err := s.tr.SyncTarget(); err != nil {
		return epochloop.Trained{}, fmt.Errorf("epoch %d: sync target: %w", epoch, err)
	}
	s.res.Epochs = epoch
	return epochloop.Trained{Train: st}, nil
}

func (s *localSteps) Backtest(ctx context.Context, epoch int) (float64, error) {
	rep, validT, parts, err := validate(ctx, s.tr, s.ds, s.pn)
	if err != nil {
		return 0, fmt.Errorf("epoch %d: backtest: %w", epoch, err)
	}
	s.rep, s.validT, s.parts = rep, validT, parts
	return rep.Sharpe, nil
}

func (s *localSteps) Checkpoint(_ context.Context, epoch int, _ epochloop.Trained, due bool) error {
	path, err := saveCheckpoint(s.e, s.tr, s.out, s.runID, epoch, s.panelMeta)
	if err != nil {
		return err
	}
	s.ckPath, s.ckDue = path, due
	return nil
}

func (s *localSteps) Done(_ context.Context, ep epochloop.Epoch) (bool, error) {
	w, epoch := s.e.stderr, ep.Epoch
	if s.ckDue {
		fmt.Fprintf(w, "epoch %d: checkpoint %s\n", epoch, s.ckPath)
	}
	if ep.ValidSharpe == nil {
		return false, nil
	}
	st, rep := ep.Train, s.rep
	stag := ""
	if st.Stagnation != nil && s.cfg.Precision == config.PrecisionBF16 {
		stag = fmt.Sprintf(", stagnation %.3f", *st.Stagnation)
	}
	what := "validation Sharpe"
	if s.pn != nil {
		what = fmt.Sprintf("validation Sharpe (equal-risk portfolio of %d series, daily)", len(s.pn.Parts))
	}
	fmt.Fprintf(w, "epoch %d: loss %.4f, grad norm %.3f%s, %s %.3f, return %.2f%%, max drawdown %.2f%%, trades %d\n",
		epoch, st.Loss, st.GradNorm, stag, what, rep.Sharpe, 100*rep.TotalReturn, 100*rep.MaxDrawdown, rep.Trades)
	if sc := &s.loop.Scores; sc.BestEpoch == epoch {
		path := s.ckPath
		sc.BestCheckpoint = &path
		s.res.BestEpoch, s.res.Checkpoint, s.res.Valid, s.res.ValidT = epoch, path, rep, s.validT
		s.res.Series = panelSeriesResults(s.pn, s.parts)
	}
	if ep.Early {
		s.res.EarlyStop = true
		fmt.Fprintf(w, "epoch %d: no better validation Sharpe in %d backtests (backtest.patience): stopping; best epoch %d\n",
			epoch, s.loop.Scores.SinceBest, s.res.BestEpoch)
	}
	return false, nil
}

// openBackend opens the backend of device, a CUDA one in the tuning of the
// environment (gpu.TuningFromEnv: DQNFLOW_STEPS_PER_GRAPH and the rest),
// and says which on one short line of e.stderr, which it returns; why
// "auto" fell back to the CPU, at length, only with --verbose ("dqnflow
// doctor" says it too).
func openBackend(e *env, device string) (trainer.Backend, string, error) {
	tu, err := gpu.TuningFromEnv()
	if err != nil {
		return nil, "", err
	}
	b, c, err := backend.Open(device, tu)
	if err != nil {
		return nil, "", err
	}
	fmt.Fprintf(e.stderr, "device: %s\n", c.Summary)
	if c.Detail != "" && e.verbose {
		fmt.Fprintf(e.stderr, "device: %s\n", c.Detail)
	}
	return b, c.Summary, nil
}

// barSpan is "first .. last" bar time of r, or "-" when r is empty.
func barSpan(ds *market.Dataset, r market.Range) string {
	if r.Len() <= 0 {
		return "-"
	}
	return day(ds, r.From) + " .. " + day(ds, r.To-1)
}

// describeInstrument says how ds prices trades: the instrument, its tick
// and costs. What a round trip costs in basis points depends on the price
// it is measured at, so printReport says it once, for the backtest's
// range.
func describeInstrument(ds *market.Dataset) string {
	in := ds.Instrument
	name := in.Name
	if name == "" {
		name = config.InstrumentCustom
	}
	slip := fmt.Sprintf("slippage %g ticks + %g bps", in.SlippageTicks, in.SlippageBps)
	if ds.Slip != nil {
		slip = "slippage half the bid/ask spread of each bar"
	}
	size := fmt.Sprintf("point value %.4g, fixed", in.PointValue)
	if in.Sizing != "" {
		size = fmt.Sprintf("sizing %s: a full position is %.4g× the capital at each range's first fill", in.Sizing, in.Leverage)
	}
	return fmt.Sprintf("%s (tick %g, %s, commission %.4g/contract + %g bps, %s)",
		name, in.TickSize, slip, in.Commission, in.CommissionBps, size)
}

// printTrainResult prints the chosen checkpoint and its final report.
func printTrainResult(e *env, r trainResult) {
	defer printSeriesResults(e, r.Series)
	stop := ""
	if r.EarlyStop {
		stop = ", stopped early"
	}
	fmt.Fprintf(e.stdout, "best epoch %d of %d%s (validation Sharpe %.3f, t = %.2f): %s\n", r.BestEpoch, r.Epochs, stop, r.Valid.Sharpe, r.ValidT, r.Checkpoint)
	if r.Abstained {
		fmt.Fprintln(e.stdout, "no edge: t is below backtest.min_valid_t, so the run recommends flat (ADR 0016)")
	}
	if r.Test == nil {
		fmt.Fprintln(e.stdout, "no test range (data.test_fraction 0): the validation range below also picked the checkpoint, so it flatters it")
		printReport(e, r.Valid)
		return
	}
	if r.Abstained {
		fmt.Fprintln(e.stdout, "test range (held out; touched only by this report), the checkpoint the run does not recommend:")
		printReport(e, *r.CheckpointTest)
		return
	}
	fmt.Fprintln(e.stdout, "test range (held out; touched only by this report):")
	printReport(e, *r.Test)
	printSeriesResults(e, r.Series)
}

// printSeriesResults prints a panel run's chosen checkpoint on each series.
func printSeriesResults(e *env, rows []seriesResult) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(e.stdout, "the panel's %d series (above: their equal-risk portfolio, daily returns):\n", len(rows))
	for _, s := range rows {
		line := fmt.Sprintf("  %-16s validation Sharpe %7.3f", s.Name, s.Valid.Sharpe)
		if t := s.Test; t != nil {
			line += fmt.Sprintf(", test Sharpe %7.3f, return %7.2f%%, max drawdown %6.2f%%, trades %d", t.Sharpe, 100*t.TotalReturn, 100*t.MaxDrawdown, t.Trades)
		}
		fmt.Fprintln(e.stdout, line)
	}
}

// saveCheckpoint snapshots tr and writes it atomically as
// DIR/epoch-NNNNNN.safetensors, with the command's checkpoint flags and
// meta added to its metadata (a panel run's, trainer.PanelMeta).
func saveCheckpoint(e *env, tr trainer.Trainer, dir, runID string, epoch int, meta map[string]string) (string, error) {
	opt, err := e.ckpt.options()
	if err != nil {
		return "", err
	}
	ck, err := tr.Snapshot()
	if err != nil {
		return "", fmt.Errorf("epoch %d: snapshot: %w", epoch, err)
	}
	for k, v := range meta {
		ck.Meta[k] = v
	}
	ck.Meta[checkpoint.MetaRunID] = runID
	ck.Meta[checkpoint.MetaEpoch] = strconv.Itoa(epoch)
	path := filepath.Join(dir, fmt.Sprintf("epoch-%06d.safetensors", epoch))
	if _, err := checkpoint.Write(path, ck, opt); err != nil {
		return "", err
	}
	return path, nil
}

// recordRecommendation adds rec to the metadata of the chosen checkpoint
// at path and writes it back in place (atomically, signed as the
// command's checkpoint flags say). The verdict needs the best validation
// backtest of the whole run, so it is known only after the file was
// written, when the epoch became the best.
func recordRecommendation(ctx context.Context, e *env, path string, rec checkpoint.Recommendation) error {
	opt, err := e.ckpt.options()
	if err != nil {
		return err
	}
	ck, _, err := readCheckpoint(ctx, e, path)
	if err != nil {
		return err
	}
	checkpoint.SetRecommendation(ck.Meta, rec)
	if _, err := checkpoint.Write(path, ck, opt); err != nil {
		return fmt.Errorf("record the run's recommendation in %s: %w", path, err)
	}
	return nil
}

func day(ds *market.Dataset, i int) string {
	if i < 0 || i >= ds.Bars.Len() {
		return "-"
	}
	return ds.Bars.Time[i].Format("2006-01-02 15:04")
}

func printJSON(e *env, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// printReport prints a backtest report beside buy-and-hold and flat.
func printReport(e *env, r sim.Report) {
	w := e.stdout
	fmt.Fprintf(w, "backtest %s .. %s (%d bars, %.0f bars/year)\n", r.From.Format("2006-01-02 15:04"), r.To.Format("2006-01-02 15:04"), r.Bars, r.BarsPerYear)
	fmt.Fprintf(w, "%-16s %12s %12s %12s\n", "", "agent", "buy & hold", "flat")
	for _, row := range report.Rows() {
		fmt.Fprintf(w, "%-16s %12s %12s %12s\n", row.Name, row.Format(r.Metrics), row.Format(r.BuyAndHold), row.Format(r.Flat))
	}
	name := r.Instrument.Name
	if name == "" {
		name = "custom"
	}
	fmt.Fprintf(w, "cost per round trip: %.2f bps of one contract's notional at this range's mean close (%s)\n", r.CostPerRoundTripBps, name)
	if in := r.Instrument; in.Sizing != "" {
		fmt.Fprintf(w, "sizing %s: a full position (%d contracts of point value %.4g) is %.4g× the capital at the first fill; buy & hold holds 1×\n",
			in.Sizing, in.MaxContracts, in.PointValue, in.Leverage)
	}
	for _, x := range []struct {
		name string
		m    sim.Metrics
	}{{"agent", r.Metrics}, {"buy & hold", r.BuyAndHold}} {
		if x.m.RuinBar > 0 {
			fmt.Fprintf(w, "%s: RUINED at bar %d (%s): equity reached the margin floor, trading stopped; shortfall %.2f\n",
				x.name, x.m.RuinBar, x.m.RuinTime.Format("2006-01-02 15:04"), x.m.RuinShortfall)
		}
	}
}
