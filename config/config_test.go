package config

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestEmptyInputIsTheDefaults(t *testing.T) {
	for _, in := range []string{"", "{}", "  {}\n"} {
		got, err := Decode("test", []byte(in))
		if err != nil {
			t.Fatalf("Decode(%q): %v", in, err)
		}
		if string(got.JSON()) != string(Defaults().JSON()) {
			t.Errorf("Decode(%q) differs from Defaults()", in)
		}
	}
	d := Defaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if d.StepsPerEpoch != 300 || d.BatchSize != 256 || d.Model.Atoms != 51 {
		t.Errorf("defaults drifted from the original design: %+v", d)
	}
}

// TestKeysLeftOutKeepDefaultsAndZeroIsTaken: a partial section keeps the
// defaults of the keys it leaves out, and an explicit zero is a value.
func TestKeysLeftOutKeepDefaultsAndZeroIsTaken(t *testing.T) {
	c, err := Decode("test", []byte(`{"optim": {"lr": 0.001, "weight_decay": 0}, "env": {"commission": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	if c.Optim.LR != 0.001 || c.Optim.WeightDecay != 0 || c.Env.Commission != 0 {
		t.Errorf("given values not taken: %+v %+v", c.Optim, c.Env)
	}
	if c.Optim.Beta2 != d.Optim.Beta2 || c.Env.NumEnvs != d.Env.NumEnvs || c.Epochs != d.Epochs {
		t.Errorf("left-out keys lost their defaults")
	}
}

// TestJSONRoundTrip: the config that ran, written and read back, is the same.
func TestJSONRoundTrip(t *testing.T) {
	c := Defaults()
	c.Seed, c.Precision, c.Data.TrainFrom = 42, PrecisionBF16Mixed, "2015-01-01"
	var back RunConfig
	if err := json.Unmarshal(c.JSON(), &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatal(err)
	}
	if string(back.JSON()) != string(c.JSON()) {
		t.Errorf("round trip changed the config:\n%s\n%s", c.JSON(), back.JSON())
	}
}

func TestBadInputNamesTheKeyAndPosition(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{`{"epochz": 3}`, []string{`unknown key "epochz"`}},
		{`{"optim": {"learning_rate": 1}}`, []string{`"optim.learning_rate"`, "line 1 column 12"}},
		{"{\n  \"epochs\": \"ten\"\n}", []string{"line 2", "epochs", "int"}},
		{`{"epochs": 3,}`, []string{"line 1"}},
		{`{"epochs": 3} {"x": 1}`, []string{"line 1 column 15"}},
		{`[1, 2]`, []string{"line 1"}},
	}
	for _, c := range cases {
		_, err := Decode("cfg.json", []byte(c.in))
		if err == nil {
			t.Errorf("Decode(%q) accepted", c.in)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%q) = %v, does not wrap ErrInvalid", c.in, err)
		}
		for _, w := range append(c.want, "cfg.json") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Decode(%q) error %q does not mention %q", c.in, err, w)
			}
		}
	}
}

// TestOutOfRangeValuesNameTheField checks one bad value per section.
func TestOutOfRangeValuesNameTheField(t *testing.T) {
	cases := []struct {
		in, field string
	}{
		{`{"epochs": 0}`, "epochs"},
		{`{"steps_per_epoch": -1}`, "steps_per_epoch"},
		{`{"batch_size": 100000}`, "batch_size"},
		{`{"device": "tpu"}`, "device"},
		{`{"precision": "fp8"}`, "precision"},
		{`{"blas": "mkl"}`, "blas"},
		{`{"data": {"train_fraction": 1}}`, "data.train_fraction"},
		{`{"data": {"valid_from": "yesterday"}}`, "data.valid_from"},
		{`{"model": {"atoms": 1}}`, "model.atoms"},
		{`{"model": {"v_min": 5, "v_max": 5}}`, "model.v_max"},
		{`{"env": {"tick_size": 0}}`, "env.tick_size"},
		{`{"env": {"epsilon_end": 1.5}}`, "env.epsilon_end"},
		{`{"env": {"flat_margin": -0.05}}`, "env.flat_margin"},
		{`{"env": {"risk_aversion": -0.01}}`, "env.risk_aversion"},
		{`{"env": {"risk_aversion": 1000}}`, "env.risk_aversion"},
		{`{"optim": {"lr": 0}}`, "optim.lr"},
		{`{"optim": {"n_step": 0}}`, "optim.n_step"},
		{`{"optim": {"target_tau": 0}}`, "optim.target_tau"},
		{`{"optim": {"stochastic_rounding": true}}`, "optim.stochastic_rounding"},
		{`{"precision": "bf16-mixed", "optim": {"stochastic_rounding": true}}`, "optim.stochastic_rounding"},
		{`{"replay": {"alpha": 2}}`, "replay.alpha"},
		{`{"replay": {"capacity": 100, "warmup": 10, "batch_size": 1}}`, "batch_size"},
		{`{"batch_size": 512, "replay": {"capacity": 300, "warmup": 10}}`, "replay.capacity"},
		{`{"replay": {"warmup": 200000}}`, "replay.warmup"},
		{`{"checkpoint": {"keep_last": 0}}`, "checkpoint.keep_last"},
		{`{"checkpoint": {"dir": " "}}`, "checkpoint.dir"},
		{`{"backtest": {"every": 0}}`, "backtest.every"},
		{`{"backtest": {"patience": -1}}`, "backtest.patience"},
		{`{"data": {"valid_bars": -5}}`, "data.valid_bars"},
		{`{"data": {"train_bars": 100}}`, "data.train_bars"},
		{`{"data": {"valid_bars": 100, "valid_from": "2020-01-01"}}`, "data.valid_bars"},
		{`{"data": {"weighting": "daily"}}`, "data.weighting"},
	}
	for _, c := range cases {
		_, err := Decode("cfg.json", []byte(c.in))
		var fe *FieldError
		if !errors.As(err, &fe) {
			// A key in the wrong section is an unknown key, also an error.
			if err != nil && strings.Contains(err.Error(), "unknown key") {
				continue
			}
			t.Errorf("Decode(%s) = %v, want a *FieldError", c.in, err)
			continue
		}
		if fe.Field != c.field {
			t.Errorf("Decode(%s) names field %q, want %q", c.in, fe.Field, c.field)
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fe.Allowed) {
			t.Errorf("Decode(%s) error %q lacks the allowed range or ErrInvalid", c.in, err)
		}
	}
}

// TestPanelWeightingsAreTaken: data.weighting takes "equal" and "bars"
// (and "", the default, equal).
func TestPanelWeightingsAreTaken(t *testing.T) {
	for _, w := range []string{"", WeightingEqual, WeightingBars} {
		if _, err := Decode("cfg.json", []byte(`{"data": {"weighting": "`+w+`"}}`)); err != nil {
			t.Errorf("data.weighting %q: %v", w, err)
		}
	}
}

// TestStochasticRoundingGoesWithBF16: the key is taken with precision
// bf16, the only mode whose weights an update rounds to bf16.
func TestStochasticRoundingGoesWithBF16(t *testing.T) {
	c, err := Decode("cfg.json", []byte(`{"precision": "bf16", "optim": {"stochastic_rounding": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Optim.StochasticRounding || Defaults().Optim.StochasticRounding {
		t.Errorf("stochastic_rounding: got %v, default %v; want true, false", c.Optim.StochasticRounding, Defaults().Optim.StochasticRounding)
	}
}

func TestParseTimeFormats(t *testing.T) {
	want := "2024-03-01T12:30:00Z"
	for _, s := range []string{"2024-03-01T12:30:00Z", "2024-03-01 12:30:00", "2024-03-01T12:30", "2024-03-01 12:30", "2024-03-01T14:30:00+02:00", "2024-03-01 12:30:00+00:00"} {
		got, err := ParseTime(s)
		if err != nil || got.Format("2006-01-02T15:04:05Z07:00") != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %s", s, got, err, want)
		}
	}
	if _, err := ParseTime("01/03/2024"); err == nil {
		t.Error("ParseTime accepted 01/03/2024")
	}
}

// TestNoEdgeIsBelowMinValidT: a t-statistic short of backtest.min_valid_t
// (or NaN) shows no edge; at or above it does; min_valid_t 0 turns the
// test off.
func TestNoEdgeIsBelowMinValidT(t *testing.T) {
	for _, tc := range []struct {
		min, t float64
		want   bool
	}{{2, 1.99, true}, {2, 2, false}, {2, 3.5, false}, {2, -4, true}, {2, math.NaN(), true}, {0, -4, false}, {0, math.NaN(), false}} {
		if got := (BacktestConfig{MinValidT: tc.min}).NoEdge(tc.t); got != tc.want {
			t.Errorf("min_valid_t %g, t %g: NoEdge = %v, want %v", tc.min, tc.t, got, tc.want)
		}
	}
}

// TestDropFeaturesSurvivesJSON: "" (every feature) and the default both
// come back from a round trip through JSON, as a workflow's input does.
func TestDropFeaturesSurvivesJSON(t *testing.T) {
	for _, v := range []string{"", DefaultDropFeatures, "rsi_7"} {
		c := Defaults()
		c.Data.DropFeatures = v
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back RunConfig
		if err := json.Unmarshal(raw, &back); err != nil || back.Data.DropFeatures != v {
			t.Errorf("drop_features %q came back as %q (%v)", v, back.Data.DropFeatures, err)
		}
	}
}

// TestNormalizeDefaultsToTrainAndCausalRoundTrips: data.normalize is
// "train" with a half-life of 2000 unless given; "causal" and its
// half-life survive a round trip through JSON.
func TestNormalizeDefaultsToTrainAndCausalRoundTrips(t *testing.T) {
	d := Defaults()
	if d.Data.Normalize != NormalizeTrain || d.Data.NormalizeHalfLife != DefaultNormalizeHalfLife || DefaultNormalizeHalfLife != 2000 {
		t.Errorf("defaults: data.normalize %q, half-life %d; want %q and 2000", d.Data.Normalize, d.Data.NormalizeHalfLife, NormalizeTrain)
	}
	c, err := Decode("test", []byte(`{"data": {"normalize": "causal", "normalize_half_life": 750}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Data.Normalize != NormalizeCausal || c.Data.NormalizeHalfLife != 750 {
		t.Fatalf("decoded data.normalize %q, half-life %d; want causal, 750", c.Data.Normalize, c.Data.NormalizeHalfLife)
	}
	back, err := Decode("back", c.JSON())
	if err != nil || back != c {
		t.Errorf("round trip changed the config (%v)", err)
	}
}
