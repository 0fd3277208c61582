// Package parity is the convergence-parity study of issue 8 §5: it
// trains the same config, seed and data in each precision mode for the
// same number of epochs (no early stopping, no checkpoints), backtests
// the validation range after every epoch, and compares each mode with
// fp32: final validation Sharpe within 5 % relative, mean Q within 10 %,
// gradient-norm mean and max within 20 %, and no NaN or Inf. It also
// holds what the last study on a GPU measured for precision bf16
// (Warning), which the commands that train print.
package parity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/internal/usage"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/trainer"
)

// Limits of convergence parity against fp32 (issue 8 §5, the original
// design's success criterion), as relative differences |x − x_fp32|/|x_fp32|.
const (
	paritySharpeRel = 0.05 // final validation Sharpe
	parityMeanQRel  = 0.10 // mean Q
	parityGradRel   = 0.20 // gradient-norm mean and max
)

// Mode is one training of the parity study: a precision mode, and
// for bf16 the rounding of the weight update.
type Mode struct {
	Name       string `json:"name"` // fp32, bf16-mixed, bf16 or bf16-sr
	Precision  string `json:"precision"`
	Stochastic bool   `json:"stochastic_rounding"`
}

// modes are the modes dqnflow parity can train, by name.
var modes = map[string]Mode{
	"fp32":       {"fp32", config.PrecisionFP32, false},
	"bf16-mixed": {"bf16-mixed", config.PrecisionBF16Mixed, false},
	"bf16":       {"bf16", config.PrecisionBF16, false},
	"bf16-sr":    {"bf16-sr", config.PrecisionBF16, true},
}

// ParseModes reads --modes: comma-separated names of modes,
// fp32 first (the reference), each once.
func ParseModes(s string) ([]Mode, error) {
	var out []Mode
	seen := map[string]bool{}
	for i, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		m, ok := modes[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: --modes: mode %d is %q: want fp32, bf16-mixed, bf16 or bf16-sr", usage.Err, i+1, name)
		case seen[name]:
			return nil, fmt.Errorf("%w: --modes: %s given twice", usage.Err, name)
		case i == 0 && name != "fp32":
			return nil, fmt.Errorf("%w: --modes: the first mode must be fp32, the reference the others are compared with (got %s)", usage.Err, name)
		}
		seen[name] = true
		out = append(out, m)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%w: --modes: want fp32 and at least one mode to compare with it", usage.Err)
	}
	return out, nil
}

// Epoch is one epoch of one mode: what the learning curves show.
type Epoch struct {
	Epoch       int     `json:"epoch"`
	Loss        float64 `json:"loss"`
	GradNorm    float64 `json:"grad_norm"`     // mean over the epoch's steps
	GradNormMax float64 `json:"grad_norm_max"` // largest of the epoch's steps
	MeanQ       float64 `json:"mean_q"`        // trainer.TrainStats.MeanQ
	Stagnation  float64 `json:"stagnation"`    // trainer.TrainStats.Stagnation
	ValidSharpe float64 `json:"valid_sharpe"`
	TrainMS     float64 `json:"train_ms"` // Train (steps_per_epoch steps)
	EpochMS     float64 `json:"epoch_ms"` // Collect, Train, SyncTarget and the validation backtest
}

// Summary is what a mode's run is compared by.
type Summary struct {
	FinalValidSharpe float64 `json:"final_valid_sharpe"` // after the last epoch
	// MeanQ is the mean of the epochs' mean Q over the last fifth of the
	// epochs (at least one): the value estimate the run ends with, with
	// the noise of one batch averaged out.
	MeanQ          float64 `json:"mean_q"`
	MeanQEpochs    int     `json:"mean_q_epochs"`
	GradNormMean   float64 `json:"grad_norm_mean"` // over every step of the run
	GradNormMax    float64 `json:"grad_norm_max"`  // over every step of the run
	Stagnation     float64 `json:"stagnation"`     // mean of the epochs' stagnation
	MSPerEpoch     float64 `json:"ms_per_epoch"`   // mean EpochMS
	MSPerTrainStep float64 `json:"ms_per_train_step"`
}

// Run is one mode's training.
type Run struct {
	Mode    Mode         `json:"mode"`
	Info    trainer.Info `json:"trainer"`
	Epochs  []Epoch      `json:"epochs"`
	Summary Summary      `json:"summary"`
	// Error is why the run stopped early: a NaN or Inf (the epoch that
	// produced it is not in Epochs) or a failure of the backend.
	Error string `json:"error,omitempty"`
}

// Check is one criterion of one mode against fp32.
type Check struct {
	Mode      string  `json:"mode"`
	Metric    string  `json:"metric"`
	Value     float64 `json:"value"`
	Reference float64 `json:"reference"` // fp32's
	RelDiff   float64 `json:"rel_diff"`  // |value − reference| / max(|reference|, 1e-12)
	Limit     float64 `json:"limit"`
	Pass      bool    `json:"pass"`
}

// Result is what dqnflow parity writes to parity.json.
type Result struct {
	Date    string           `json:"date"`
	Command string           `json:"command"`
	Device  string           `json:"device"`
	Seconds float64          `json:"seconds"`
	Config  config.RunConfig `json:"config"` // fp32's; the others differ in precision and optim.stochastic_rounding
	Runs    []Run            `json:"runs"`
	Checks  []Check          `json:"checks"`
	// Holds says, per mode other than fp32, whether every check passed.
	Holds map[string]bool `json:"holds"`
	Plot  string          `json:"plot"` // the learning curves, beside parity.json
}

// Options are the inputs of one study.
type Options struct {
	// Backend trains every mode, on Device (its summary, for the record).
	Backend trainer.Backend
	Device  string
	// Config is the fp32 reference's; each mode changes its precision and
	// optim.stochastic_rounding. Dataset is its prepared data.
	Config  config.RunConfig
	Dataset *market.Dataset
	Modes   []Mode // fp32 first (ParseModes)
	// Out is the directory parity.json and the learning curves go to;
	// Command the command line the result records.
	Out, Command string
	// Stderr receives the progress of every epoch.
	Stderr io.Writer
}

// Study trains every mode of o, compares each with fp32, and writes
// parity.json and learning-curves.png under o.Out. Whether parity holds
// is in the result (Verdict says it as an error).
func Study(ctx context.Context, o Options, start time.Time) (Result, error) {
	res := Result{
		Date: start.UTC().Format(time.RFC3339), Command: o.Command,
		Device: o.Device, Config: o.Config, Holds: map[string]bool{},
	}
	for _, m := range o.Modes {
		c := o.Config
		c.Precision, c.Optim.StochasticRounding = m.Precision, m.Stochastic
		r, err := train(ctx, o.Stderr, o.Backend, c, o.Dataset, m)
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, r)
	}
	res.Checks, res.Holds = compare(res.Runs)
	res.Plot = "learning-curves.png"
	if err := report.WriteEpochPanels(filepath.Join(o.Out, res.Plot), Panels(res.Runs)); err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	if err := jsonfile.Write(filepath.Join(o.Out, "parity.json"), res); err != nil {
		return res, err
	}
	return res, nil
}

// Verdict is nil when every mode holds parity with fp32, else an error
// naming the modes that do not and by how much.
func Verdict(res Result) error {
	var failed []string
	for _, r := range res.Runs[1:] {
		if !res.Holds[r.Mode.Name] {
			failed = append(failed, r.Mode.Name+" ("+figure(res, r.Mode.Name)+")")
		}
	}
	if res.Runs[0].Error != "" {
		return fmt.Errorf("parity: the fp32 reference did not finish: %s", res.Runs[0].Error)
	}
	if len(failed) > 0 {
		return fmt.Errorf("parity with fp32 does not hold for %s", strings.Join(failed, ", "))
	}
	return nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// train trains cfg in mode m for cfg.Epochs epochs and records each.
// A NaN or Inf, or ErrNonFinite from the trainer, ends the run with
// Error set; other failures are returned.
func train(ctx context.Context, stderr io.Writer, b trainer.Backend, cfg config.RunConfig, ds *market.Dataset, m Mode) (Run, error) {
	r := Run{Mode: m}
	tr, err := b.New(ctx, cfg, ds, nil)
	if err != nil {
		return r, fmt.Errorf("parity %s: %w", m.Name, err)
	}
	defer tr.Close()
	r.Info = tr.Info()
	fmt.Fprintf(stderr, "parity %s: %s on %s, precision %s (state %s), %d epochs of %d steps\n",
		m.Name, r.Info.Backend, r.Info.Device, r.Info.Precision, r.Info.StateDType, cfg.Epochs, cfg.StepsPerEpoch)
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		t0 := time.Now()
		if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
			return r, fmt.Errorf("parity %s: epoch %d: collect: %w", m.Name, epoch, err)
		}
		t1 := time.Now()
		st, err := tr.Train(ctx, cfg.StepsPerEpoch, nil)
		if errors.Is(err, trainer.ErrNonFinite) {
			r.Error = fmt.Sprintf("epoch %d: %v", epoch, err)
			break
		}
		if err != nil {
			return r, fmt.Errorf("parity %s: epoch %d: train: %w", m.Name, epoch, err)
		}
		t2 := time.Now()
		if err := tr.SyncTarget(); err != nil {
			return r, fmt.Errorf("parity %s: epoch %d: sync target: %w", m.Name, epoch, err)
		}
		rep, err := tr.Backtest(ctx, ds, ds.Valid)
		if err != nil {
			return r, fmt.Errorf("parity %s: epoch %d: backtest: %w", m.Name, epoch, err)
		}
		ep := Epoch{
			Epoch: epoch, Loss: st.Loss, GradNorm: st.GradNorm, GradNormMax: st.GradNormMax, MeanQ: math.NaN(), Stagnation: math.NaN(),
			ValidSharpe: rep.Sharpe, TrainMS: ms(t2.Sub(t1)), EpochMS: ms(time.Since(t0)),
		}
		if st.MeanQ != nil {
			ep.MeanQ = *st.MeanQ
		}
		if st.Stagnation != nil {
			ep.Stagnation = *st.Stagnation
		}
		if what := nonFiniteField(ep); what != "" {
			r.Error = fmt.Sprintf("epoch %d: %s is not finite", epoch, what)
			break
		}
		r.Epochs = append(r.Epochs, ep)
		fmt.Fprintf(stderr, "parity %s: epoch %d: loss %.4f, grad norm %.3f (max %.3f), mean Q %.4f, stagnation %.4f, validation Sharpe %.3f, %.0f ms\n",
			m.Name, epoch, ep.Loss, ep.GradNorm, ep.GradNormMax, ep.MeanQ, ep.Stagnation, ep.ValidSharpe, ep.EpochMS)
	}
	r.Summary = summarise(r.Epochs, cfg.StepsPerEpoch)
	return r, nil
}

// nonFiniteField names the first quantity of ep that is NaN or infinite.
func nonFiniteField(ep Epoch) string {
	for _, f := range []struct {
		name string
		v    float64
	}{{"loss", ep.Loss}, {"grad norm", ep.GradNorm}, {"grad norm max", ep.GradNormMax}, {"mean Q", ep.MeanQ},
		{"stagnation", ep.Stagnation}, {"validation Sharpe", ep.ValidSharpe}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return f.name
		}
	}
	return ""
}

// summarise reduces a run's epochs to the figures parity compares.
func summarise(eps []Epoch, steps int) Summary {
	var s Summary
	n := len(eps)
	if n == 0 {
		return s
	}
	s.FinalValidSharpe = eps[n-1].ValidSharpe
	s.MeanQEpochs = max(1, n/5)
	var epochMS, train float64
	for i, ep := range eps {
		if i >= n-s.MeanQEpochs {
			s.MeanQ += ep.MeanQ / float64(s.MeanQEpochs)
		}
		s.GradNormMean += ep.GradNorm / float64(n)
		s.GradNormMax = max(s.GradNormMax, ep.GradNormMax)
		s.Stagnation += ep.Stagnation / float64(n)
		epochMS += ep.EpochMS
		train += ep.TrainMS
	}
	s.MSPerEpoch = epochMS / float64(n)
	s.MSPerTrainStep = train / float64(n*max(steps, 1))
	return s
}

// compare compares every run after the first (fp32) with it.
func compare(runs []Run) ([]Check, map[string]bool) {
	var checks []Check
	holds := map[string]bool{}
	ref := runs[0]
	for _, r := range runs[1:] {
		ok := r.Error == "" && ref.Error == "" && len(r.Epochs) == len(ref.Epochs)
		checks = append(checks, Check{Mode: r.Mode.Name, Metric: "finite (no NaN or Inf, every epoch run)",
			Value: float64(len(r.Epochs)), Reference: float64(len(ref.Epochs)), Pass: ok})
		for _, c := range []struct {
			metric    string
			got, want float64
			limit     float64
		}{
			{"final validation Sharpe", r.Summary.FinalValidSharpe, ref.Summary.FinalValidSharpe, paritySharpeRel},
			{"mean Q", r.Summary.MeanQ, ref.Summary.MeanQ, parityMeanQRel},
			{"gradient-norm mean", r.Summary.GradNormMean, ref.Summary.GradNormMean, parityGradRel},
			{"gradient-norm max", r.Summary.GradNormMax, ref.Summary.GradNormMax, parityGradRel},
		} {
			rel := relDiff(c.got, c.want)
			pass := rel <= c.limit
			checks = append(checks, Check{Mode: r.Mode.Name, Metric: c.metric, Value: c.got, Reference: c.want,
				RelDiff: rel, Limit: c.limit, Pass: pass})
			ok = ok && pass
		}
		holds[r.Mode.Name] = ok
	}
	return checks, holds
}

// relDiff is |got − want| / max(|want|, 10⁻¹²): relative, and huge but
// finite (JSON has no Inf) when fp32's value is 0 and got's is not.
func relDiff(got, want float64) float64 {
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-12)
}

// figure is the failed checks of mode as a short text, e.g.
// "final validation Sharpe 12.3 % off (limit 5 %)".
func figure(res Result, mode string) string {
	var parts []string
	for _, c := range res.Checks {
		if c.Mode != mode || c.Pass {
			continue
		}
		if c.Limit == 0 {
			parts = append(parts, fmt.Sprintf("stopped after %d of %d epochs", int(c.Value), int(c.Reference)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f %% off (limit %.0f %%)", c.Metric, 100*c.RelDiff, 100*c.Limit))
	}
	return strings.Join(parts, ", ")
}

// Panels are the learning curves of every mode.
func Panels(runs []Run) []report.EpochPanel {
	panel := func(title, label string, f func(Epoch) float64) report.EpochPanel {
		p := report.EpochPanel{Title: title, YLabel: label}
		for _, r := range runs {
			v := make([]float64, len(r.Epochs))
			for i, ep := range r.Epochs {
				v[i] = f(ep)
			}
			p.Series = append(p.Series, report.EpochSeries{Name: r.Mode.Name, Values: v})
		}
		return p
	}
	return []report.EpochPanel{
		panel("Validation Sharpe after each epoch", "Sharpe", func(e Epoch) float64 { return e.ValidSharpe }),
		panel("Mean Q of the taken actions (last batch of the epoch)", "Q", func(e Epoch) float64 { return e.MeanQ }),
		panel("Training loss (mean over the epoch)", "loss", func(e Epoch) float64 { return e.Loss }),
		panel("Gradient norm before clipping (mean over the epoch)", "‖g‖", func(e Epoch) float64 { return e.GradNorm }),
		panel("Stagnation: share of weight updates the stored value absorbed", "share", func(e Epoch) float64 { return e.Stagnation }),
	}
}

// Print prints the modes side by side and the checks.
func Print(w io.Writer, res Result) {
	fmt.Fprintf(w, "convergence parity, %d epochs of %d steps, seed %d, data %s, %s\n",
		res.Config.Epochs, res.Config.StepsPerEpoch, res.Config.Seed, res.Config.Data.Path, res.Device)
	fmt.Fprintf(w, "%-11s %13s %10s %10s %10s %11s %10s %10s  %s\n", "mode", "final Sharpe", "mean Q", "‖g‖ mean", "‖g‖ max", "stagnation", "ms/epoch", "ms/step", "parity")
	for i, r := range res.Runs {
		s := r.Summary
		verdict := "reference"
		if i > 0 {
			verdict = map[bool]string{true: "holds", false: "FAILS"}[res.Holds[r.Mode.Name]]
		}
		if r.Error != "" {
			verdict += " (" + r.Error + ")"
		}
		fmt.Fprintf(w, "%-11s %13.3f %10.4f %10.4f %10.4f %11.4f %10.1f %10.3f  %s\n", r.Mode.Name, s.FinalValidSharpe, s.MeanQ,
			s.GradNormMean, s.GradNormMax, s.Stagnation, s.MSPerEpoch, s.MSPerTrainStep, verdict)
	}
	for _, c := range res.Checks {
		if c.Limit == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-11s %-24s %10.4g vs fp32 %10.4g: %6.2f %% (limit %.0f %%) %s\n", c.Mode, c.Metric, c.Value, c.Reference,
			100*c.RelDiff, 100*c.Limit, map[bool]string{true: "ok", false: "FAIL"}[c.Pass])
	}
}

// note is what the last parity study on a GPU found for one setting
// of precision bf16 (docs/precision.md): Date is empty while it has not
// been measured; Figure names the failed checks (figure) when it
// does not hold.
type note struct {
	Date, Command, Figure string
	Holds                 bool
}

// bf16Parity is the measured parity of precision bf16 with rounding to
// nearest (false) and with optim.stochastic_rounding (true), from the
// device run of dqnflow parity recorded in docs/precision.md.
var bf16Parity = map[bool]note{
	false: {Date: "2026-12-01", Command: "dqnflow parity --device cuda --epochs 50 on an H200",
		Figure: "final validation Sharpe 100 % off, mean Q 12.5 % off, gradient-norm max 30.6 % off fp32; 96 % of updates absorbed"},
	true: {Date: "2026-12-01", Command: "dqnflow parity --device cuda --epochs 50 on an H200",
		Figure: "final validation Sharpe 89 % off, gradient-norm mean 20.9 % off fp32 (mean Q within 3.2 %)"},
}

// Warning is the warning dqnflow prints when a config selects
// precision bf16 while the measurement says it does not hold convergence
// parity with fp32, or has not measured it: "" otherwise.
func Warning(cfg config.RunConfig) string {
	if cfg.Precision != config.PrecisionBF16 {
		return ""
	}
	n := bf16Parity[cfg.Optim.StochasticRounding]
	mode := "bf16"
	if cfg.Optim.StochasticRounding {
		mode = "bf16 with optim.stochastic_rounding"
	}
	switch {
	case n.Date == "":
		return fmt.Sprintf("warning: precision %s (bf16 storage everywhere) has not been measured against fp32 yet (dqnflow parity --device cuda; docs/precision.md)", mode)
	case !n.Holds:
		return fmt.Sprintf("warning: precision %s does not hold convergence parity with fp32: %s (measured %s: %s; docs/precision.md). bf16-mixed keeps float32 masters",
			mode, n.Figure, n.Date, n.Command)
	}
	return ""
}
