package localrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/internal/progress"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/research/parity"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/epochloop"
)

// Options are what a run needs from the process that starts it.
type Options struct {
	// Source reads the data; Config is the run's.
	Source prices.Source
	Config config.RunConfig
	// Out is the directory for checkpoints and report.json (runs/<run
	// id> when empty); RunID names the run and is required.
	Out, RunID string
	// Backend opens the backend of a device (cli's, which says which
	// on stderr); Checkpoint gives the options checkpoints are written
	// and read with, asked when the first one is written.
	Backend    func(device string) (trainer.Backend, error)
	Checkpoint func() (checkpoint.Options, error)
	// Stderr receives the progress.
	Stderr io.Writer
}

// Result is what a local training run ends with: the checkpoint that
// validation picked, its validation report and, when the data has a test
// range, its report on that held-out range, which nothing else touched.
type Result struct {
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
	Series []SeriesResult `json:"series,omitempty"`
}

// SeriesResult is the chosen checkpoint of a panel run on one series.
type SeriesResult struct {
	Name   string      `json:"name"`
	Path   string      `json:"path"`
	SHA256 string      `json:"sha256,omitempty"`
	Valid  sim.Report  `json:"validation"`
	Test   *sim.Report `json:"test,omitempty"`
}

// Final is the report the run is judged by: the test range when there is
// one (flat's when the run abstained), else validation (which also picked
// the checkpoint, so it is biased upwards).
func (r Result) Final() sim.Report {
	if r.Test != nil {
		return *r.Test
	}
	return r.Valid
}

// Run trains o.Config in this process and writes checkpoints and the
// final report (report.json) under o.Out. Every backtest.every epochs the
// online network runs on the validation range; the epoch with the best
// validation Sharpe is checkpointed (and kept), and after
// backtest.patience backtests without a better one training stops. The
// chosen checkpoint then runs once on the test range.
//
// With data.series the run trains on a panel (market.PreparePanel: each
// series prepared alone, their training ranges joined) and validates as
// the walk-forward study's panel runs do: on the equal-risk portfolio of
// the validation backtests of every series (sim.PanelValidation), its
// daily Sharpe ratio picking the epoch and its t-statistic gating the
// recommendation. Its checkpoints record the panel (trainer.PanelMeta:
// the series' files, their SHA-256 and ranges), and the test report is
// the portfolio's of the series' test ranges, with each series' own.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	cfg := o.Config
	b, err := o.Backend(cfg.Device)
	if err != nil {
		return res, err
	}
	ds, pn, err := Prepare(ctx, o.Stderr, o.Source, cfg)
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
	fmt.Fprintf(o.Stderr, "trainer: %s on %s, precision %s (GEMM operands %s, state %s, compute %s), %d parameters\n",
		info.Backend, info.Device, info.Precision, info.StorageDType, info.StateDType, info.ComputeDType, info.Parameters)
	if w := parity.Warning(cfg); w != "" {
		fmt.Fprintln(o.Stderr, w)
	}
	res.RunID = o.RunID
	out := o.Out
	if out == "" {
		out = filepath.Join("runs", o.RunID)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return res, fmt.Errorf("create output directory: %w", err)
	}
	fmt.Fprintf(o.Stderr, "run %s: checkpoints and report in %s\n", o.RunID, out)
	loop := &epochloop.Loop[string]{Config: cfg}
	steps := &steps{o: o, tr: tr, cfg: cfg, ds: ds, pn: pn, out: out, panelMeta: panelMeta, res: &res, loop: loop}
	if _, err := loop.Run(ctx, 0, cfg.Epochs, steps); err != nil {
		return res, err
	}
	if res.BestEpoch > 0 && cfg.Backtest.NoEdge(res.ValidT) {
		res.Abstained = true
		fmt.Fprintf(o.Stderr, "no edge: the best validation Sharpe, %.3f at epoch %d, has t = %.2f over %.2f years, below backtest.min_valid_t = %g; the run recommends flat (ADR 0016)\n",
			res.Valid.Sharpe, res.BestEpoch, res.ValidT, float64(res.Valid.Bars-1)/res.Valid.BarsPerYear, cfg.Backtest.MinValidT)
	}
	if res.BestEpoch > 0 {
		rec := checkpoint.NewRecommendation(res.Valid.Sharpe, res.ValidT, cfg.Backtest.MinValidT, res.Abstained)
		if err := recordRecommendation(ctx, o.Checkpoint, res.Checkpoint, rec); err != nil {
			return res, err
		}
	}
	if pn != nil {
		if err := panelTest(ctx, o.Checkpoint, pn, &res); err != nil {
			return res, err
		}
	} else if ds.Test.Len() >= 2 {
		pol, err := LoadPolicy(ctx, o.Checkpoint, res.Checkpoint)
		if err != nil {
			return res, err
		}
		rep, err := pol.Backtest(ds, ds.Test)
		if err != nil {
			return res, fmt.Errorf("test backtest of %s: %w", res.Checkpoint, err)
		}
		flat, err := FlatTest(ds)
		if err != nil {
			return res, err
		}
		res.Test, res.CheckpointTest, res.FlatTest = &rep, &rep, &flat
		if res.Abstained {
			res.Test = &flat
		}
	}
	return res, jsonfile.Write(filepath.Join(out, "report.json"), res)
}

// steps are the steps of Run's epochs (epochloop.Steps): a progress bar
// while an epoch trains, checkpoint files in out, and on o.Stderr, once
// the epoch is done, its cadence checkpoint and its validation backtest.
// The loop checkpoints the best epoch and stops at the patience; res
// follows the best epoch (its checkpoint, validation report and
// t-statistic). The epoch the patience runs out at is not checkpointed
// unless the cadence asks: the run's result is its best checkpoint.
type steps struct {
	o         Options
	tr        trainer.Trainer
	cfg       config.RunConfig
	ds        *market.Dataset
	pn        *market.Panel
	out       string
	panelMeta map[string]string
	res       *Result
	loop      *epochloop.Loop[string]

	// The epoch in progress: its checkpoint (ckDue: asked by the
	// cadence) and its validation backtest.
	ckPath string
	ckDue  bool
	rep    sim.Report
	validT float64
	parts  []sim.Report
}

func (s *steps) Train(ctx context.Context, epoch int) (epochloop.Trained, error) {
	s.ckPath, s.ckDue = "", false
	if _, err := s.tr.Collect(ctx, s.cfg.Env.CollectSteps); err != nil {
		return epochloop.Trained{}, fmt.Errorf("epoch %d: collect: %w", epoch, err)
	}
	bar := progress.New(s.o.Stderr, fmt.Sprintf("epoch %d/%d", epoch, s.cfg.Epochs), s.cfg.StepsPerEpoch)
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

func (s *steps) Backtest(ctx context.Context, epoch int) (float64, error) {
	rep, validT, parts, err := validate(ctx, s.tr, s.ds, s.pn)
	if err != nil {
		return 0, fmt.Errorf("epoch %d: backtest: %w", epoch, err)
	}
	s.rep, s.validT, s.parts = rep, validT, parts
	return rep.Sharpe, nil
}

func (s *steps) Checkpoint(_ context.Context, epoch int, _ epochloop.Trained, due bool) error {
	path, err := saveCheckpoint(s.o.Checkpoint, s.tr, s.out, s.o.RunID, epoch, s.panelMeta)
	if err != nil {
		return err
	}
	s.ckPath, s.ckDue = path, due
	return nil
}

func (s *steps) Done(_ context.Context, ep epochloop.Epoch) (bool, error) {
	w, epoch := s.o.Stderr, ep.Epoch
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

// saveCheckpoint snapshots tr and writes it atomically as
// DIR/epoch-NNNNNN.safetensors, with the options opts gives and meta
// added to its metadata (a panel run's, trainer.PanelMeta).
func saveCheckpoint(opts func() (checkpoint.Options, error), tr trainer.Trainer, dir, runID string, epoch int, meta map[string]string) (string, error) {
	opt, err := opts()
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
// at path and writes it back in place (atomically, signed as opts says).
// The verdict needs the best validation backtest of the whole run, so it
// is known only after the file was written, when the epoch became the
// best.
func recordRecommendation(ctx context.Context, opts func() (checkpoint.Options, error), path string, rec checkpoint.Recommendation) error {
	opt, err := opts()
	if err != nil {
		return err
	}
	ck, err := ReadCheckpoint(ctx, path, opt)
	if err != nil {
		return err
	}
	checkpoint.SetRecommendation(ck.Meta, rec)
	if _, err := checkpoint.Write(path, ck, opt); err != nil {
		return fmt.Errorf("record the run's recommendation in %s: %w", path, err)
	}
	return nil
}
