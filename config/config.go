// Package config defines RunConfig, the one input of a training run: what the
// CLI reads from --config, what the TrainingRun workflow takes from the
// Temporal UI, and what every checkpoint stores.
//
// Every field is optional. A key left out keeps its Defaults value, so "{}"
// trains the default model on the bundled S&P 500 data. Decode rejects unknown
// keys, and Validate names the field, the value and the allowed range of the
// first field that is out of range.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/files"
)

// Precision modes (DESIGN.md §3).
const (
	PrecisionFP32      = "fp32"
	PrecisionBF16Mixed = "bf16-mixed"
	PrecisionBF16      = "bf16"
)

// RunConfig is the whole configuration of one training run. The top-level
// keys seed, epochs, steps_per_epoch, batch_size, device, precision, blas and the
// sections data, model, env, optim, replay, checkpoint and backtest are public
// and stable.
type RunConfig struct {
	// Seed seeds every random stream of the run (weights, exploration,
	// replay sampling, episode windows). Default 1.
	Seed uint64 `json:"seed"`
	// Epochs is the number of training epochs. Default 20.
	Epochs int `json:"epochs"`
	// StepsPerEpoch is the number of gradient steps per epoch. Default 300.
	StepsPerEpoch int `json:"steps_per_epoch"`
	// BatchSize is the number of transitions per gradient step. Default 256.
	BatchSize int `json:"batch_size"`
	// Device is "cpu", "cuda", "cuda:N" or "auto". Default "auto": the run
	// trains on whatever device the worker's slot has (its GPU, or the CPU
	// on a worker without one), so a run started with "{}" trains on any
	// deployment; "cpu", "cuda" and "cuda:N" are refused by a worker of
	// another kind.
	Device string `json:"device"`
	// Precision is "fp32", "bf16-mixed" or "bf16". Default "fp32".
	Precision string `json:"precision"`
	// BLAS is the matrix library of the CPU backend: "openblas" (OpenBLAS,
	// loaded at run time), "accelerate" (macOS), "gonum" (pure Go: slower,
	// bit-identical on every machine), or "auto": OpenBLAS on Linux,
	// Accelerate on macOS, gonum when that does not open. A library asked
	// for by name that is missing fails the run. What ran is in the
	// trainer's Info and the run's row. The CUDA backend ignores it.
	// Default "auto".
	BLAS string `json:"blas"`
	// ReadbackInterval is how many gradient steps the CUDA backend runs
	// between reads of the loss and gradient norm (and the NaN check): the
	// device is never waited for inside such a chunk. Default 100; the CPU
	// backend checks every step.
	ReadbackInterval int `json:"readback_interval"`

	Data       DataConfig       `json:"data"`
	Model      ModelConfig      `json:"model"`
	Env        EnvConfig        `json:"env"`
	Optim      OptimConfig      `json:"optim"`
	Replay     ReplayConfig     `json:"replay"`
	Checkpoint CheckpointConfig `json:"checkpoint"`
	Backtest   BacktestConfig   `json:"backtest"`

	decodeErr string // set by UnmarshalJSON, reported by Validate
}

// DataConfig selects the price file and splits it into a training, a
// validation and a test range, in time order and never overlapping. Times
// are RFC 3339 or "2006-01-02[ 15:04[:05]]" (UTC). When no time is given,
// the first TrainFraction of the bars (after the feature warmup) train, the
// last TestFraction are the test range and the bars between validate; with
// ValidBars a rolling window at the end of the data does (TestBars, when
// positive, holds out the newest bars after it).
//
// Validation picks the best checkpoint and stops training early
// (backtest.patience); the test range is touched only by the final report
// (dqnflow train, evaluate, walkforward) and is where `dqnflow backtest`
// runs by default. A test_fraction of 0 (and no test times) means no test
// range: what a config stored before the test range existed decodes to
// (DecodeStored).
type DataConfig struct {
	// Path is a CSV file, "bundled:NAME" for a file bundled in the binary, or
	// "synthetic" for the seeded synthetic series with a planted signal.
	// Default "bundled:USA500IDXUSD_H1.csv".
	Path      string `json:"path"`
	TrainFrom string `json:"train_from,omitempty"`
	TrainTo   string `json:"train_to,omitempty"`
	ValidFrom string `json:"valid_from,omitempty"`
	ValidTo   string `json:"valid_to,omitempty"`
	// TestFrom and TestTo bound the test range when times are given; with
	// times and neither of them there is no test range.
	TestFrom      string  `json:"test_from,omitempty"`
	TestTo        string  `json:"test_to,omitempty"`
	TrainFraction float64 `json:"train_fraction"` // default 0.7, in (0, 1)
	// TestFraction is the share of the bars after the warmup, at the end,
	// held out as the test range; train_fraction + test_fraction < 1, the
	// rest validates. Default 0.15; 0 means no test range.
	TestFraction float64 `json:"test_fraction"`
	// ValidBars, when positive, makes a rolling window at the end of the
	// data: the last ValidBars bars validate and the TrainBars bars before
	// them train (all earlier bars after the feature warmup when TrainBars
	// is 0). Each run, a scheduled Retrain say, takes the newest bars of
	// the file as it is then. Not combined with times. Default 0 (off).
	ValidBars int `json:"valid_bars"`
	TrainBars int `json:"train_bars"`
	// TestBars, with ValidBars, holds out the newest TestBars bars as the
	// test range; the validation window ends where it begins. Default 0.
	TestBars int `json:"test_bars"`
	// SyntheticBars is the length of the synthetic series. Default 20000.
	SyntheticBars int `json:"synthetic_bars"`
	// SyntheticPhi is the planted signal of the synthetic series, the
	// lag-1 autocorrelation φ of its returns (market.SyntheticSeries); 0
	// is a series with no signal. In [0, 0.9], default 0.35.
	SyntheticPhi float64 `json:"synthetic_phi"`
	// Mirror makes training play the training range and its mirror image,
	// the same bars with prices reflected in log space (every return
	// negated), so a policy cannot profit in training from the range's
	// drift alone (market/mirror.go). Validation, test and backtests use
	// the data as it is. CPU backend only for now. Default false.
	Mirror bool `json:"mirror,omitempty"`
	// DropFeatures names, comma-separated, market features
	// (market.FeatureNames) the policy does not see: they are 0 in every
	// observation, in training and in every backtest of the run's
	// checkpoints (the run's normaliser carries the list). A string, not a
	// list, so that a RunConfig stays comparable; always written (no
	// omitempty), so that "" survives a round trip through JSON. Default
	// DefaultDropFeatures; "" shows the policy every feature.
	DropFeatures string `json:"drop_features"`
	// Normalize is how the features are standardised (market.Normalizer):
	// NormalizeTrain ("train") with the mean and standard deviation of the
	// whole training range, so that inside that range a feature at bar t
	// is scaled by statistics of bars after t; or NormalizeCausal
	// ("causal") with exponentially weighted statistics of the series' own
	// earlier bars only (half-life NormalizeHalfLife), so no feature at
	// any bar depends on a later bar. Causal statistics are trusted after
	// market.CausalBurnIn bars: those bars after the feature warmup only
	// seed them and belong to no range (the ranges are train mode's, cut
	// to start after them: in practice training starts later). ADR 0039.
	// Default "train".
	Normalize string `json:"normalize"`
	// NormalizeHalfLife is the half-life in bars of "causal"
	// normalisation: a bar's weight in the statistics halves every
	// NormalizeHalfLife bars. In [1, 10_000_000]; default 2000, about four
	// months of hourly bars of a market open 23 hours a day, five days a
	// week (ADR 0039). Ignored by "train".
	NormalizeHalfLife int `json:"normalize_half_life"`
	// Series makes the run a panel: one agent trained on several series at
	// once (market.PreparePanel, market.JoinPanel; ADR 0037), in `dqnflow
	// train`, a TrainingRun and `dqnflow walkforward --panel` alike. Each
	// series is split by the data.* ranges above on its own and validated
	// on its own validation range; the equal-risk portfolio of those
	// backtests picks the epoch. Entries are separated by commas or
	// newlines; each is a path or a glob of price files (read only inside
	// the data roots, as Path is), optionally followed by "=INSTRUMENT", a
	// symbol of the instrument table (market.Instruments) or "auto" (the
	// table's entry for the file's symbol). A string, not a list, so that a
	// RunConfig stays comparable. When set, Path is not read (write it ""
	// to say so). Default "" (one series, Path).
	Series string `json:"series,omitempty"`
	// Weighting is how a panel's environments draw their series
	// (sim.WindowStart): "equal" (each series as often) or "bars" (in
	// proportion to its training bars). Default "equal" ("" means it).
	Weighting string `json:"weighting,omitempty"`
}

// Panel weightings (DataConfig.Weighting, data.weighting).
const (
	// WeightingEqual draws each series of a panel with the same
	// probability, however many training bars it has: a short series is
	// not drowned by a long one. The default ("" means it too).
	WeightingEqual = "equal"
	// WeightingBars draws a series in proportion to its training bars, so
	// every training bar of the panel is about as likely to be played.
	WeightingBars = "bars"
)

// ModelConfig is the network of DESIGN.md §3: trunk s1, s2 → value head
// v1 → v2 (atoms) and one advantage head a1_d → a2_d per action branch.
// The branches are fixed: direction (short, flat, long), size (1/4..4/4 of
// max contracts) and exit rule (none, stop at 1×ATR, stop at 2×ATR).
type ModelConfig struct {
	Trunk1 int     `json:"trunk1"` // default 256
	Trunk2 int     `json:"trunk2"` // default 256
	Head   int     `json:"head"`   // default 128
	Atoms  int     `json:"atoms"`  // default 51
	VMin   float64 `json:"v_min"`  // default -10
	VMax   float64 `json:"v_max"`  // default 10
}

// EnvConfig is the futures environment and the instrument it trades.
//
// Costs are set relative to the instrument (market.ResolveInstrument and
// market.Presets give the numbers): Instrument picks how.
//
//	"auto"    the documented default of the data file: ES for the bundled
//	          S&P 500, BTC for the bundled bitcoin, "bps" for the synthetic
//	          series and for any other file
//	"ES", "NQ", "CL", "BRN", "BTC"
//	          the contract's tick size and commission per side (converted to
//	          price points with its real point value); SlippageTicks ticks of
//	          slippage per fill
//	"bps"     SlippageBps and CommissionBps of the fill price per fill, so
//	          the cost follows the price level of any series
//	"custom"  TickSize, SlippageTicks and Commission as given (Commission is
//	          money per contract at the resolved PointValue): how configs
//	          were read before presets existed
//	"table"   the instrument table's row (market.Instruments: tick, half-
//	          spread slippage and commission) of the file's symbol
//	          (market.SymbolOf: BTCUSD_H1.csv → BTCUSD)
//	SYMBOL    that row of the table, e.g. "EURUSD", "SPY", "BTCUSD"
type EnvConfig struct {
	NumEnvs      int `json:"num_envs"`      // parallel environments, default 32
	EpisodeBars  int `json:"episode_bars"`  // random window length, default 512
	MaxContracts int `json:"max_contracts"` // default 4
	// Instrument is "auto", a preset (ES, NQ, CL, BRN, BTC), "bps",
	// "custom", "table" or a table symbol (see above). Default "auto".
	Instrument    string  `json:"instrument"`
	TickSize      float64 `json:"tick_size"`      // "custom" only, price units; default 0.25
	SlippageTicks float64 `json:"slippage_ticks"` // presets and "custom"; default 1
	Commission    float64 `json:"commission"`     // "custom" only, money per contract per fill; default 0.62
	// SlippageBps and CommissionBps are the costs of instrument "bps", in
	// basis points of the fill price per fill. Defaults 1 and 0.5.
	SlippageBps   float64 `json:"slippage_bps"`
	CommissionBps float64 `json:"commission_bps"`
	// MarginFloor ends trading in a backtest when equity falls to
	// MarginFloor × InitialCapital or below (0: when it reaches zero): the
	// position is closed and the account stays flat; the report names the
	// bar. In [0, 1), default 0.
	MarginFloor float64 `json:"margin_floor"`
	// TurnoverPenalty is subtracted from the training reward per full
	// position traded (|Δ contracts| / MaxContracts), in reward units (one
	// ATR of a full position). Backtests book only the real costs. Default
	// 0.05: without it the agent churns on a series with no signal; 0.15
	// churns less there but fell behind buy-and-hold's Sharpe on both
	// bundled series, and 0.25 suppresses a real signal
	// (docs/perf/learning-2026-12-01.md).
	TurnoverPenalty float64 `json:"turnover_penalty"`
	// RiskAversion κ makes the training reward a mean-variance utility of
	// each step's P&L: with r the step's P&L in reward units (one ATR of a
	// full position), the reward is RewardScale·(r − κ/2·r²) before the
	// turnover penalty (Ritter 2017, "Machine learning for trading"). A
	// full position's r² averages about 0.6 on both bundled series, so κ
	// 0.02 charges it about 0.006 a bar, close to the S&P 500's drift of
	// 0.007; a quarter position pays a sixteenth of that. Backtests book
	// only the real P&L. In [0, 100], default 0 (the plain P&L): κ 0.02
	// and 0.1 moved the walk-forward test Sharpe by no more than seed
	// noise on either bundled series over seeds 1–8
	// (docs/perf/learning-2026-12-05-reward.md).
	RiskAversion float64 `json:"risk_aversion"`
	// RewardScale multiplies the training reward (one ATR move of a full
	// position earns about RewardScale). Default 1.
	RewardScale float64 `json:"reward_scale"`
	// FlatMargin is how much more than flat a position must be worth, in
	// expected Q, before the greedy policy takes or keeps it: the greedy
	// direction is flat unless the best direction's Q exceeds flat's by
	// FlatMargin × RewardScale (reward units of one ATR of a full position;
	// model.Greedy, ADR 0014). Every greedy decision uses it: the
	// collector's, validation and test backtests, predict. 0 is the plain
	// argmax. Default 0: measured on three seeds of learn-check, no margin
	// met both of its targets (0.05 helped seed 1 and cut seed 3's signal
	// to 0.64 of the oracle; docs/perf/learning-2026-12-01.md).
	FlatMargin float64 `json:"flat_margin"`
	// PointValue is the money value of one price point per contract; 0 (the
	// default) sizes the contract by Sizing: a full position is worth
	// the sizing's leverage × InitialCapital at the first fill of every
	// backtested range, and at the last training bar for the training
	// environment (market.Sizing, ADR 0036; the resolved values are stored
	// with the run). A positive value fixes the contract.
	PointValue float64 `json:"point_value"`
	// Sizing is how a full position is sized (market.Sizing): "notional",
	// a full position worth InitialCapital, or "vol_target", a full
	// position whose annualised volatility, estimated from the training
	// range only, is TargetVol × InitialCapital, so that positions in
	// different instruments carry the same risk. Default "notional".
	Sizing string `json:"sizing,omitempty"`
	// TargetVol is the annualised volatility of a full position under
	// sizing "vol_target", as a share of InitialCapital, in [0, 10]; 0 means
	// DefaultTargetVol (0.10). The leverage it asks for is capped at
	// market.MaxLeverage (5×); vol_target needs PointValue 0.
	TargetVol      float64 `json:"target_vol,omitempty"`
	InitialCapital float64 `json:"initial_capital"` // default 100000
	// Exploration: epsilon-greedy per branch, decayed linearly from
	// EpsilonStart to EpsilonEnd over the first EpsilonDecayFraction of the
	// run's environment steps (RunConfig.TotalEnvSteps), so the schedule
	// ends inside any run length. EpsilonDecaySteps, when positive, gives
	// the length in environment steps instead (summed over environments),
	// as configs did before the fraction existed.
	EpsilonStart         float64 `json:"epsilon_start"`          // default 1
	EpsilonEnd           float64 `json:"epsilon_end"`            // default 0.05
	EpsilonDecayFraction float64 `json:"epsilon_decay_fraction"` // (0, 1], default 0.5
	EpsilonDecaySteps    int     `json:"epsilon_decay_steps"`    // default 0 (use the fraction)
	// CollectSteps is the number of environment steps per environment that
	// Collect runs in each epoch. Default 64 (2048 transitions with 32 envs).
	CollectSteps int `json:"collect_steps"`
}

// OptimConfig is the optimiser and the learning target.
type OptimConfig struct {
	LR          float64 `json:"lr"`           // default 1e-4 (3e-4 before issue 9: docs/perf/learning-2026-12-01.md)
	Beta1       float64 `json:"beta1"`        // default 0.9
	Beta2       float64 `json:"beta2"`        // default 0.999
	Eps         float64 `json:"eps"`          // default 1e-8
	WeightDecay float64 `json:"weight_decay"` // decoupled, default 1e-5
	ClipNorm    float64 `json:"clip_norm"`    // global gradient norm, default 10; 0 disables
	// SpectralBound caps the largest singular value of each weight matrix;
	// 0 disables. Default 4.
	SpectralBound float64 `json:"spectral_bound"`
	Gamma         float64 `json:"gamma"`  // default 0.9 (0.99 before issue 9: 6 % of S&P returns fell outside ±10)
	NStep         int     `json:"n_step"` // default 3
	// TargetTau is the EMA rate of SyncTarget: target ← τ·online + (1−τ)·target.
	// Default 0.5 (SyncTarget runs once per epoch).
	TargetTau float64 `json:"target_tau"`
	// StochasticRounding rounds each weight update of precision "bf16" to
	// one of the two nearest bf16 values at random, up with probability
	// equal to the distance from the lower one in bf16 ulps, instead of to
	// the nearest: an update smaller than half an ulp then moves the weight
	// on average instead of never (docs/precision.md). The random bits are
	// a hash of (seed, Adam step, parameter index) (bf16.SRBits), so a run
	// stays bit-reproducible. Only precision "bf16" rounds its weights to
	// bf16; with "fp32" or "bf16-mixed" it is an error. Default false.
	StochasticRounding bool `json:"stochastic_rounding"`
}

// ReplayConfig is the proportional prioritised replay buffer (Schaul et al.
// 2016): P(i) = p_i^α / Σ p^α, weights w_i = (N·P(i))^−β / max w, with β
// annealed linearly from Beta0 to 1 over the first BetaFraction of the
// run's gradient steps (RunConfig.TotalGradSteps), or over BetaSteps
// gradient steps when that is positive (as configs did before the
// fraction existed).
type ReplayConfig struct {
	Capacity     int     `json:"capacity"`      // default 100000
	Alpha        float64 `json:"alpha"`         // default 0.6
	Beta0        float64 `json:"beta0"`         // default 0.4
	BetaFraction float64 `json:"beta_fraction"` // (0, 1], default 1
	BetaSteps    int     `json:"beta_steps"`    // default 0 (use the fraction)
	PriorityEps  float64 `json:"priority_eps"`  // default 1e-6
	// Warmup is the number of transitions stored before training starts;
	// Train collects more first when the buffer holds fewer. Default 2048.
	Warmup int `json:"warmup"`
}

// CheckpointConfig sets how often checkpoints are written and which are kept.
type CheckpointConfig struct {
	Every    int    `json:"every"`     // epochs between checkpoints, default 1
	KeepLast int    `json:"keep_last"` // default 3
	KeepBest int    `json:"keep_best"` // by validation Sharpe, default 1
	Dir      string `json:"dir"`       // blob root, default "checkpoints"
}

// BacktestConfig sets validation backtests and early stopping.
type BacktestConfig struct {
	Every int `json:"every"` // epochs between validation backtests, default 1
	// Patience stops the run after this many validation backtests without a
	// better validation Sharpe; 0 disables early stopping. Default 5.
	Patience int `json:"patience"`
	// MinValidT is the evidence a local run's chosen checkpoint must show
	// before the run recommends trading it: the t-statistic of its
	// validation Sharpe, Sharpe·√(validation years), at least this. Below
	// it the run abstains: it reports flat on the test range, beside the
	// checkpoint's own test report (ADR 0016). Retrain promotes a
	// challenger only with the same evidence. 0 turns the gate off.
	// Default 2.
	MinValidT float64 `json:"min_valid_t"`
}

// NoEdge reports whether a validation Sharpe with t-statistic t falls short
// of MinValidT: the one rule by which a local run abstains and Retrain
// refuses a promotion (ADR 0016). A NaN t falls short; MinValidT 0 never.
func (b BacktestConfig) NoEdge(t float64) bool { return b.MinValidT > 0 && !(t >= b.MinValidT) }

// Defaults returns the default configuration.
func Defaults() RunConfig {
	return RunConfig{
		Seed: 1, Epochs: 20, StepsPerEpoch: 300, BatchSize: 256, ReadbackInterval: 100,
		Device: "auto", Precision: PrecisionFP32, BLAS: "auto",
		Data: DataConfig{Path: data.Default, TrainFraction: 0.7, TestFraction: 0.15, SyntheticBars: 20000, SyntheticPhi: 0.35,
			DropFeatures: DefaultDropFeatures, Normalize: NormalizeTrain, NormalizeHalfLife: DefaultNormalizeHalfLife},
		Model: ModelConfig{Trunk1: 256, Trunk2: 256, Head: 128, Atoms: 51, VMin: -10, VMax: 10},
		Env: EnvConfig{
			NumEnvs: 32, EpisodeBars: 512, MaxContracts: 4, Instrument: InstrumentAuto,
			TickSize: 0.25, SlippageTicks: 1, Commission: 0.62, SlippageBps: 1, CommissionBps: 0.5,
			InitialCapital: 100000, RewardScale: 1, TurnoverPenalty: 0.05,
			EpsilonStart: 1, EpsilonEnd: 0.05, EpsilonDecayFraction: 0.5, CollectSteps: 64,
		},
		Optim: OptimConfig{
			LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-5, ClipNorm: 10,
			SpectralBound: 4, Gamma: 0.9, NStep: 3, TargetTau: 0.5,
		},
		Replay:     ReplayConfig{Capacity: 100000, Alpha: 0.6, Beta0: 0.4, BetaFraction: 1, PriorityEps: 1e-6, Warmup: 2048},
		Checkpoint: CheckpointConfig{Every: 1, KeepLast: 3, KeepBest: 1, Dir: "checkpoints"},
		Backtest:   BacktestConfig{Every: 1, Patience: 5, MinValidT: 2},
	}
}

// UnmarshalJSON decodes onto the defaults, so a key the JSON leaves out keeps
// its default and one it gives (zero included) is taken as given. It never
// fails: an unknown key or a wrong type is kept and reported by Validate, so
// that the workflow, whose input the SDK decodes, can fail with a
// non-retryable error that names the key instead of a workflow task that
// fails forever.
func (c *RunConfig) UnmarshalJSON(raw []byte) error {
	type plain RunConfig // no methods: no recursion
	p := plain(Defaults())
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&p)
	if err == nil {
		if _, tokErr := dec.Token(); tokErr != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	*c = RunConfig(p)
	if err != nil {
		c.decodeErr = describeJSONError(raw, err)
	}
	return nil
}

// ErrInvalid wraps every validation and decoding error, so callers (the
// workflow) can tell a bad config, which no retry fixes, from other failures.
var ErrInvalid = errors.New("invalid config")

// FieldError names the field, the value and what is allowed.
type FieldError struct {
	Field   string // JSON path, e.g. "optim.lr"
	Value   any
	Allowed string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("config field %s = %v: %s", e.Field, e.Value, e.Allowed)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Decode parses a JSON config strictly: unknown keys, wrong types and
// trailing data are errors that name the key or the line and column. name
// labels the input in errors (a file name, "workflow input"). Keys left out
// take their defaults; the result is validated.
func Decode(name string, raw []byte) (RunConfig, error) {
	c := Defaults()
	if len(bytes.TrimSpace(raw)) > 0 {
		// Syntax errors come from Unmarshal before UnmarshalJSON runs.
		if err := json.Unmarshal(raw, &c); err != nil {
			return RunConfig{}, fmt.Errorf("%s: %w: %s", name, ErrInvalid, describeJSONError(raw, err))
		}
	}
	if err := c.Validate(); err != nil {
		return RunConfig{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// MaxFileBytes bounds a config file: the defaults take about 2 KB, so a
// file over this is not a config, and is refused before it is read.
const MaxFileBytes = 1 << 20

// Load reads and decodes a config file, a regular file of at most
// MaxFileBytes (files.ReadFile); an empty path gives the defaults. An
// empty file is an error: it is more likely a file that was not written
// (or /dev/null) than a wish for the defaults, which "{}" says.
func Load(path string) (RunConfig, error) {
	if path == "" {
		return Defaults(), nil
	}
	raw, err := files.ReadFile(path, MaxFileBytes)
	if err != nil {
		return RunConfig{}, fmt.Errorf("read config: %w", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return RunConfig{}, fmt.Errorf("%s: %w: the file is empty; a config of the defaults is {}", path, ErrInvalid)
	}
	return Decode(path, raw)
}

func describeJSONError(raw []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(raw, syn.Offset)
		return fmt.Sprintf("line %d column %d: %v", line, col, syn)
	case errors.As(err, &typ):
		line, col := position(raw, typ.Offset)
		return fmt.Sprintf("line %d column %d: field %s: expected %s, got JSON %s", line, col, typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		if desc, ok := unknownKey(raw); ok {
			return desc
		}
		return "unknown key " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return err.Error()
}

// position turns the offset encoding/json reports (the bytes read up to and
// including the offending one) into the 1-based line and column of that byte.
func position(raw []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off-1 && i < int64(len(raw)); i++ {
		if raw[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// JSON returns the config as indented JSON.
func (c RunConfig) JSON() []byte {
	b, _ := json.MarshalIndent(c, "", "  ")
	return b
}

// Instrument choices of env.instrument (EnvConfig documents each).
const (
	InstrumentAuto   = "auto"
	InstrumentBps    = "bps"
	InstrumentCustom = "custom"
	// InstrumentTable is the instrument table's row (market.Instruments)
	// of the data file's symbol (market.SymbolOf); env.instrument may also
	// name a row's symbol itself (e.g. "EURUSD").
	InstrumentTable = "table"
)

// Sizing rules of env.sizing (EnvConfig.Sizing, market.Sizing).
const (
	SizingNotional  = "notional"
	SizingVolTarget = "vol_target"
	// DefaultTargetVol is env.target_vol when it is 0.
	DefaultTargetVol = 0.10
)

// InstrumentPresets are the contracts env.instrument can name; market.Presets
// holds their tick sizes and commissions.
var InstrumentPresets = []string{"ES", "NQ", "CL", "BRN", "BTC"}

// InstrumentSymbols are the rows of the instrument table env.instrument can
// name besides the presets; market.Instruments holds their figures (a
// market test checks that the two lists agree).
var InstrumentSymbols = []string{
	"AUDCHF", "AUDUSD", "EURAUD", "EURCAD", "EURCHF", "EURGBP", "EURJPY", "EURNZD", "EURUSD",
	"GBPAUD", "GBPCAD", "GBPCHF", "GBPJPY", "GBPUSD", "NZDUSD", "USDCAD", "USDCHF", "USDJPY",
	"ADAUSDT", "BTCUSD", "DOGEUSDT", "ETCUSDT", "ETHUSD", "ETHUSDT", "LINKUSDT", "LTCUSDT",
	"MATICUSDT", "SOLUSDT", "UNIUSDT", "XRPUSDT",
	"AAPLUSUSD", "NFLXUSUSD", "TSLAUSUSD", "AAPL", "AIG", "BAC", "IBM", "SPY", "VXX",
	"USA30IDXUSD", "USATECHIDXUSD", "GBRIDXGBP", "USA500IDXUSD",
}

// validInstrument reports whether s is a value env.instrument accepts.
func validInstrument(s string) bool {
	if s == InstrumentAuto || s == InstrumentBps || s == InstrumentCustom || s == InstrumentTable {
		return true
	}
	for _, p := range InstrumentPresets {
		if s == p {
			return true
		}
	}
	for _, p := range InstrumentSymbols {
		if s == p {
			return true
		}
	}
	return false
}

// TotalEnvSteps is the number of environment steps the run's Collect calls
// take, summed over environments: epochs × env.collect_steps × env.num_envs.
// (Train's warm-up collection adds steps only when replay.warmup exceeds
// one epoch's transitions; the schedules ignore those.)
func (c RunConfig) TotalEnvSteps() int64 {
	return int64(c.Epochs) * int64(c.Env.CollectSteps) * int64(c.Env.NumEnvs)
}

// TotalGradSteps is the number of gradient steps of the run:
// epochs × steps_per_epoch.
func (c RunConfig) TotalGradSteps() int64 {
	return int64(c.Epochs) * int64(c.StepsPerEpoch)
}

// EpsilonDecayEnvSteps is the length of the exploration schedule in
// environment steps: env.epsilon_decay_steps when positive, else
// max(1, round(env.epsilon_decay_fraction × TotalEnvSteps)).
func (c RunConfig) EpsilonDecayEnvSteps() int64 {
	if c.Env.EpsilonDecaySteps > 0 {
		return int64(c.Env.EpsilonDecaySteps)
	}
	return max(1, int64(math.Round(c.Env.EpsilonDecayFraction*float64(c.TotalEnvSteps()))))
}

// BetaAnnealSteps is the length of the PER β schedule in gradient steps:
// replay.beta_steps when positive, else
// max(1, round(replay.beta_fraction × TotalGradSteps)).
func (c RunConfig) BetaAnnealSteps() int {
	if c.Replay.BetaSteps > 0 {
		return c.Replay.BetaSteps
	}
	return int(max(1, min(math.MaxInt32, math.Round(c.Replay.BetaFraction*float64(c.TotalGradSteps())))))
}

// GreedyMargin is the margin of the greedy policy in Q units,
// env.flat_margin × env.reward_scale, as float32 (model.Greedy).
func (c RunConfig) GreedyMargin() float32 {
	return float32(c.Env.FlatMargin * c.Env.RewardScale)
}

// DefaultDropFeatures are the features a policy does not see unless the
// config says otherwise: the calendar (hour and weekday) and the volume
// features. Without them the walk-forward test Sharpe per window on the
// bundled series rose by 0.40 ± 0.19 (S&P 500) and 1.52 ± 0.85 (bitcoin)
// over twelve seeds; at the eight that had not chosen the setting by
// 0.34 ± 0.23 and 0.76 ± 0.93: no worse, probably a little better (ADR
// 0022 and its amendment).
const DefaultDropFeatures = "hour_sin,hour_cos,dow_sin,dow_cos,volume_z_24,volume_ratio_168,volume_trend_24_168"

// Feature normalisations of data.normalize (DataConfig.Normalize,
// market.Normalizer).
const (
	NormalizeTrain  = "train"
	NormalizeCausal = "causal"
	// DefaultNormalizeHalfLife is data.normalize_half_life by default.
	DefaultNormalizeHalfLife = 2000
)

// DecodeStored decodes a config stored with a run or a checkpoint. It is
// Decode, except that a config written before a key existed keeps the
// meaning it had then: without data.test_fraction (and no test times) it
// has no test range, without env.instrument its tick_size, slippage
// and commission are taken as given ("custom"), and without
// env.flat_margin its greedy policy is the plain argmax (margin 0), and
// without data.drop_features its policy sees every feature. The exploration and β
// schedules need no such care: older configs always gave their lengths in
// steps, which still win over the fractions; nor does data.normalize,
// whose default ("train") is what every older run did.
func DecodeStored(name string, raw []byte) (RunConfig, error) {
	c, err := Decode(name, raw)
	if err != nil {
		return c, err
	}
	var keys struct {
		Data map[string]json.RawMessage `json:"data"`
		Env  map[string]json.RawMessage `json:"env"`
	}
	if json.Unmarshal(raw, &keys) != nil {
		return c, nil // Decode accepted it; nothing more to learn
	}
	if _, ok := keys.Data["test_fraction"]; !ok {
		c.Data.TestFraction = 0
	}
	if _, ok := keys.Env["instrument"]; !ok {
		c.Env.Instrument = InstrumentCustom
	}
	if _, ok := keys.Env["flat_margin"]; !ok {
		c.Env.FlatMargin = 0
	}
	if _, ok := keys.Data["drop_features"]; !ok {
		c.Data.DropFeatures = ""
	}
	return c, c.Validate()
}
