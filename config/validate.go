package config

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

var cudaDevice = regexp.MustCompile(`^cuda(:[0-9]+)?$`)

// Validate checks every field against its allowed range and returns a
// *FieldError for the first that is out of range.
func (c *RunConfig) Validate() error {
	if c.decodeErr != "" {
		return fmt.Errorf("%w: %s", ErrInvalid, c.decodeErr)
	}
	type check struct {
		field   string
		value   any
		ok      bool
		allowed string
	}
	intIn := func(f string, v, lo, hi int) check {
		return check{f, v, v >= lo && v <= hi, fmt.Sprintf("must be an integer in [%d, %d]", lo, hi)}
	}
	floatIn := func(f string, v, lo, hi float64) check {
		return check{f, v, !math.IsNaN(v) && v >= lo && v <= hi, fmt.Sprintf("must be in [%g, %g]", lo, hi)}
	}
	floatOpen := func(f string, v, lo, hi float64) check {
		return check{f, v, !math.IsNaN(v) && v > lo && v < hi, fmt.Sprintf("must be in (%g, %g)", lo, hi)}
	}
	floatOpenLo := func(f string, v, lo, hi float64) check {
		return check{f, v, !math.IsNaN(v) && v > lo && v <= hi, fmt.Sprintf("must be in (%g, %g]", lo, hi)}
	}
	floatOpenHi := func(f string, v, lo, hi float64) check {
		return check{f, v, !math.IsNaN(v) && v >= lo && v < hi, fmt.Sprintf("must be in [%g, %g)", lo, hi)}
	}
	// why adds to k's allowed range what the field means.
	why := func(k check, s string) check {
		k.allowed += ": " + s
		return k
	}
	checks := []check{
		intIn("epochs", c.Epochs, 1, 1_000_000),
		intIn("steps_per_epoch", c.StepsPerEpoch, 1, 10_000_000),
		intIn("batch_size", c.BatchSize, 1, 65536),
		intIn("readback_interval", c.ReadbackInterval, 1, 1000000),
		{"device", c.Device, c.Device == "cpu" || c.Device == "auto" || cudaDevice.MatchString(c.Device), `must be "cpu", "cuda", "cuda:N" or "auto"`},
		{"blas", c.BLAS, c.BLAS == "auto" || c.BLAS == "gonum" || c.BLAS == "openblas" || c.BLAS == "accelerate", `must be "auto", "gonum", "openblas" or "accelerate"`},
		{"precision", c.Precision, c.Precision == PrecisionFP32 || c.Precision == PrecisionBF16Mixed || c.Precision == PrecisionBF16, `must be "fp32", "bf16-mixed" or "bf16"`},

		floatOpen("data.train_fraction", c.Data.TrainFraction, 0, 1),
		floatIn("data.test_fraction", c.Data.TestFraction, 0, 0.9),
		{"data.train_fraction", c.Data.TrainFraction, c.Data.TrainFraction+c.Data.TestFraction < 1,
			fmt.Sprintf("plus data.test_fraction (%g) must be below 1, so that some bars validate", c.Data.TestFraction)},
		intIn("data.synthetic_bars", c.Data.SyntheticBars, 2000, 10_000_000),
		floatIn("data.synthetic_phi", c.Data.SyntheticPhi, 0, 0.9),
		{"data.normalize", c.Data.Normalize, c.Data.Normalize == NormalizeTrain || c.Data.Normalize == NormalizeCausal,
			`must be "train" (statistics of the training range) or "causal" (exponentially weighted statistics of earlier bars only)`},
		intIn("data.normalize_half_life", c.Data.NormalizeHalfLife, 1, 10_000_000),

		intIn("model.trunk1", c.Model.Trunk1, 1, 16384),
		intIn("model.trunk2", c.Model.Trunk2, 1, 16384),
		intIn("model.head", c.Model.Head, 1, 16384),
		intIn("model.atoms", c.Model.Atoms, 2, 1024),
		floatIn("model.v_min", c.Model.VMin, -1e6, 1e6),
		{"model.v_max", c.Model.VMax, c.Model.VMax > c.Model.VMin && c.Model.VMax <= 1e6, fmt.Sprintf("must be greater than model.v_min (%g) and at most 1e6", c.Model.VMin)},

		intIn("env.num_envs", c.Env.NumEnvs, 1, 65536),
		intIn("env.episode_bars", c.Env.EpisodeBars, 8, 10_000_000),
		intIn("env.max_contracts", c.Env.MaxContracts, 1, 1_000_000),
		{"env.instrument", c.Env.Instrument, validInstrument(c.Env.Instrument),
			fmt.Sprintf(`must be "auto", one of the presets %s, "bps", "custom", "table" (the data file's row of the instrument table) or a symbol of that table (%s)`,
				strings.Join(InstrumentPresets, ", "), strings.Join(InstrumentSymbols, " "))},
		{"env.sizing", c.Env.Sizing, c.Env.Sizing == "" || c.Env.Sizing == SizingNotional || c.Env.Sizing == SizingVolTarget,
			`must be "notional" (a full position worth env.initial_capital) or "vol_target" (a full position of env.target_vol annualised volatility)`},
		why(floatIn("env.target_vol", c.Env.TargetVol, 0, 10),
			fmt.Sprintf("the annualised volatility of a full position under env.sizing vol_target as a share of env.initial_capital (0: %g)", DefaultTargetVol)),
		{"env.sizing", c.Env.Sizing, c.Env.Sizing != SizingVolTarget || c.Env.PointValue == 0,
			fmt.Sprintf("vol_target sizes the contract itself; env.point_value (%g) must be 0 (auto) with it", c.Env.PointValue)},
		floatOpen("env.tick_size", c.Env.TickSize, 0, 1e9),
		floatIn("env.slippage_bps", c.Env.SlippageBps, 0, 10000),
		floatIn("env.commission_bps", c.Env.CommissionBps, 0, 10000),
		why(floatOpenHi("env.margin_floor", c.Env.MarginFloor, 0, 1), "a fraction of env.initial_capital"),
		floatIn("env.turnover_penalty", c.Env.TurnoverPenalty, 0, 100),
		floatIn("env.risk_aversion", c.Env.RiskAversion, 0, 100),
		floatIn("env.flat_margin", c.Env.FlatMargin, 0, 100),
		floatOpenLo("env.reward_scale", c.Env.RewardScale, 0, 1000),
		floatIn("env.slippage_ticks", c.Env.SlippageTicks, 0, 1e6),
		floatIn("env.commission", c.Env.Commission, 0, 1e9),
		floatIn("env.point_value", c.Env.PointValue, 0, 1e12),
		floatOpen("env.initial_capital", c.Env.InitialCapital, 0, 1e15),
		floatIn("env.epsilon_start", c.Env.EpsilonStart, 0, 1),
		floatIn("env.epsilon_end", c.Env.EpsilonEnd, 0, 1),
		why(floatOpenLo("env.epsilon_decay_fraction", c.Env.EpsilonDecayFraction, 0, 1),
			"the share of the run's environment steps over which epsilon decays"),
		intIn("env.epsilon_decay_steps", c.Env.EpsilonDecaySteps, 0, math.MaxInt32),
		intIn("env.collect_steps", c.Env.CollectSteps, 1, 10_000_000),

		floatOpen("optim.lr", c.Optim.LR, 0, 1),
		floatIn("optim.beta1", c.Optim.Beta1, 0, 0.999999),
		floatIn("optim.beta2", c.Optim.Beta2, 0, 0.999999999),
		floatOpen("optim.eps", c.Optim.Eps, 0, 1),
		floatIn("optim.weight_decay", c.Optim.WeightDecay, 0, 1),
		floatIn("optim.clip_norm", c.Optim.ClipNorm, 0, 1e9),
		floatIn("optim.spectral_bound", c.Optim.SpectralBound, 0, 1e9),
		floatOpen("optim.gamma", c.Optim.Gamma, 0, 1.0000001),
		intIn("optim.n_step", c.Optim.NStep, 1, 64),
		floatOpenLo("optim.target_tau", c.Optim.TargetTau, 0, 1),
		{"optim.stochastic_rounding", c.Optim.StochasticRounding, !c.Optim.StochasticRounding || c.Precision == PrecisionBF16,
			fmt.Sprintf(`needs precision "bf16" (got %q, whose float32 master weights are not rounded to bf16 by an update)`, c.Precision)},

		intIn("replay.capacity", c.Replay.Capacity, 2, 1<<28),
		floatIn("replay.alpha", c.Replay.Alpha, 0, 1),
		floatIn("replay.beta0", c.Replay.Beta0, 0, 1),
		why(floatOpenLo("replay.beta_fraction", c.Replay.BetaFraction, 0, 1),
			"the share of the run's gradient steps over which β anneals to 1"),
		intIn("replay.beta_steps", c.Replay.BetaSteps, 0, math.MaxInt32),
		floatOpen("replay.priority_eps", c.Replay.PriorityEps, 0, 1),
		intIn("replay.warmup", c.Replay.Warmup, 1, c.Replay.Capacity),

		intIn("checkpoint.every", c.Checkpoint.Every, 1, 1_000_000),
		intIn("checkpoint.keep_last", c.Checkpoint.KeepLast, 1, 1_000_000),
		intIn("checkpoint.keep_best", c.Checkpoint.KeepBest, 0, 1_000_000),
		{"checkpoint.dir", c.Checkpoint.Dir, strings.TrimSpace(c.Checkpoint.Dir) != "", "must not be empty"},

		intIn("backtest.every", c.Backtest.Every, 1, 1_000_000),
		intIn("backtest.patience", c.Backtest.Patience, 0, 1_000_000),
		floatIn("backtest.min_valid_t", c.Backtest.MinValidT, 0, 100),
	}
	for _, k := range checks {
		if !k.ok {
			return &FieldError{Field: k.field, Value: k.value, Allowed: k.allowed}
		}
	}
	if c.Data.ValidBars < 0 || c.Data.TrainBars < 0 || c.Data.TestBars < 0 {
		return &FieldError{Field: "data.valid_bars", Value: fmt.Sprintf("%d (train_bars %d, test_bars %d)", c.Data.ValidBars, c.Data.TrainBars, c.Data.TestBars), Allowed: "must not be negative"}
	}
	if c.Data.TestBars > 0 && c.Data.ValidBars == 0 {
		return &FieldError{Field: "data.test_bars", Value: c.Data.TestBars, Allowed: "must come with data.valid_bars (the rolling window); otherwise use data.test_fraction or data.test_from"}
	}
	if c.Data.TrainBars > 0 && c.Data.ValidBars == 0 {
		return &FieldError{Field: "data.train_bars", Value: c.Data.TrainBars, Allowed: "needs data.valid_bars (the window ends at the data's end)"}
	}
	if c.Data.ValidBars > 0 && c.Data.Timed() {
		return &FieldError{Field: "data.valid_bars", Value: c.Data.ValidBars, Allowed: "cannot be combined with data.train_from/train_to/valid_from/valid_to/test_from/test_to"}
	}
	if w := c.Data.Weighting; w != "" && w != WeightingEqual && w != WeightingBars {
		return &FieldError{Field: "data.weighting", Value: fmt.Sprintf("%q", w), Allowed: fmt.Sprintf("must be %q (each series of a panel as often, the default) or %q (in proportion to its training bars)", WeightingEqual, WeightingBars)}
	}
	if c.Replay.Capacity < c.BatchSize {
		return &FieldError{Field: "replay.capacity", Value: c.Replay.Capacity, Allowed: fmt.Sprintf("must be at least batch_size (%d)", c.BatchSize)}
	}
	for _, t := range []struct{ field, value string }{
		{"data.train_from", c.Data.TrainFrom}, {"data.train_to", c.Data.TrainTo},
		{"data.valid_from", c.Data.ValidFrom}, {"data.valid_to", c.Data.ValidTo},
		{"data.test_from", c.Data.TestFrom}, {"data.test_to", c.Data.TestTo},
	} {
		if t.value == "" {
			continue
		}
		if _, err := ParseTime(t.value); err != nil {
			return &FieldError{Field: t.field, Value: fmt.Sprintf("%q", t.value), Allowed: "must be RFC 3339 or YYYY-MM-DD[ HH:MM[:SS]]"}
		}
	}
	return nil
}

// Timed reports whether the data ranges are given by time (any of the
// train, validation or test times is set).
func (d DataConfig) Timed() bool {
	return d.TrainFrom != "" || d.TrainTo != "" || d.ValidFrom != "" || d.ValidTo != "" || d.TestFrom != "" || d.TestTo != ""
}

var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// ParseTime parses a config time; times without a zone are UTC.
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want RFC 3339 or YYYY-MM-DD[ HH:MM[:SS]]", s)
}
