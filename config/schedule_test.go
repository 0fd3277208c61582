package config

import (
	"errors"
	"strings"
	"testing"
)

// TestSchedulesFinishInsideAnyRunLength: with the default fractions, ε
// reaches its end value and β reaches 1 before the last step of runs of
// very different lengths.
func TestSchedulesFinishInsideAnyRunLength(t *testing.T) {
	for _, epochs := range []int{1, 3, 20, 500} {
		c := Defaults()
		c.Epochs = epochs
		if got, total := c.EpsilonDecayEnvSteps(), c.TotalEnvSteps(); got > total || got < 1 {
			t.Errorf("epochs %d: epsilon decays over %d env steps, run takes %d", epochs, got, total)
		}
		if got, total := c.BetaAnnealSteps(), c.TotalGradSteps(); int64(got) > total || got < 1 {
			t.Errorf("epochs %d: β anneals over %d gradient steps, run takes %d", epochs, got, total)
		}
	}
	c := Defaults() // 20 epochs × 64 steps × 32 envs = 40,960 env steps; 6,000 gradient steps
	if got := c.EpsilonDecayEnvSteps(); got != 20480 {
		t.Errorf("default epsilon schedule = %d env steps, want half of 40960", got)
	}
	if got := c.BetaAnnealSteps(); got != 6000 {
		t.Errorf("default β schedule = %d gradient steps, want 6000", got)
	}
}

// TestScheduleStepsWinOverFractions: a config that gives the schedules in
// steps (every config written before the fractions) keeps them.
func TestScheduleStepsWinOverFractions(t *testing.T) {
	c, err := Decode("test", []byte(`{"env": {"epsilon_decay_steps": 200000}, "replay": {"beta_steps": 6000}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Env.FlatMargin != 0 || c.GreedyMargin() != 0 {
		t.Errorf("old config read with env.flat_margin %g, want 0 (the plain argmax it was trained and selected with)", c.Env.FlatMargin)
	}
	if c.EpsilonDecayEnvSteps() != 200000 || c.BetaAnnealSteps() != 6000 {
		t.Errorf("steps not kept: epsilon %d, β %d", c.EpsilonDecayEnvSteps(), c.BetaAnnealSteps())
	}
}

// TestScheduleFractionsOutOfRangeAreNamed: a fraction outside (0, 1] is an
// error naming the key and the allowed range.
func TestScheduleFractionsOutOfRangeAreNamed(t *testing.T) {
	for _, tc := range []struct{ in, field string }{
		{`{"env": {"epsilon_decay_fraction": 0}}`, "env.epsilon_decay_fraction"},
		{`{"env": {"epsilon_decay_fraction": 1.5}}`, "env.epsilon_decay_fraction"},
		{`{"replay": {"beta_fraction": -0.1}}`, "replay.beta_fraction"},
		{`{"env": {"epsilon_decay_steps": -1}}`, "env.epsilon_decay_steps"},
		{`{"data": {"train_fraction": 0.9, "test_fraction": 0.1}}`, "data.train_fraction"},
		{`{"data": {"test_bars": 10}}`, "data.test_bars"},
		{`{"env": {"instrument": "SPX"}}`, "env.instrument"},
		{`{"env": {"margin_floor": 1}}`, "env.margin_floor"},
		{`{"env": {"reward_scale": 0}}`, "env.reward_scale"},
		{`{"data": {"normalize": "rolling"}}`, "data.normalize"},
		{`{"data": {"normalize": ""}}`, "data.normalize"},
		{`{"data": {"normalize": "causal", "normalize_half_life": 0}}`, "data.normalize_half_life"},
		{`{"data": {"normalize_half_life": -5}}`, "data.normalize_half_life"},
	} {
		_, err := Decode("test", []byte(tc.in))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%s) = %v, want a FieldError for %s", tc.in, err, tc.field)
			continue
		}
		if !strings.Contains(err.Error(), "must") {
			t.Errorf("Decode(%s): %v does not say what is allowed", tc.in, err)
		}
	}
}

// TestStoredConfigKeepsItsMeaning: a config stored before the test range,
// instrument presets and the greedy margin existed decodes with no test
// range, its own costs and the plain argmax; a current one decodes as
// written.
func TestStoredConfigKeepsItsMeaning(t *testing.T) {
	old := `{"data": {"path": "bundled:USA500IDXUSD_H1.csv", "train_fraction": 0.8},
	         "env": {"tick_size": 0.25, "slippage_ticks": 1, "commission": 0.62, "epsilon_decay_steps": 200000},
	         "replay": {"beta_steps": 6000}}`
	c, err := DecodeStored("old", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if c.Data.TestFraction != 0 || c.Data.TrainFraction != 0.8 || c.Env.Instrument != InstrumentCustom {
		t.Errorf("old config read as test_fraction %g, train_fraction %g, instrument %q; want 0, 0.8, custom",
			c.Data.TestFraction, c.Data.TrainFraction, c.Env.Instrument)
	}
	if c.Env.FlatMargin != 0 || c.GreedyMargin() != 0 {
		t.Errorf("old config read with env.flat_margin %g, want 0 (the plain argmax it was trained and selected with)", c.Env.FlatMargin)
	}
	if c.EpsilonDecayEnvSteps() != 200000 || c.BetaAnnealSteps() != 6000 {
		t.Errorf("old schedules changed: %d, %d", c.EpsilonDecayEnvSteps(), c.BetaAnnealSteps())
	}
	if c.Data.Normalize != NormalizeTrain {
		t.Errorf("old config read with data.normalize %q, want %q (the training-range statistics it was trained with)", c.Data.Normalize, NormalizeTrain)
	}
	cur, err := DecodeStored("current", Defaults().JSON())
	if err != nil {
		t.Fatal(err)
	}
	if string(cur.JSON()) != string(Defaults().JSON()) {
		t.Errorf("a current config changed on DecodeStored")
	}
	margin := Defaults()
	margin.Env.FlatMargin, margin.Env.RewardScale = 0.25, 2
	got, err := DecodeStored("margin", margin.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if got.Env.FlatMargin != 0.25 || got.GreedyMargin() != 0.5 {
		t.Errorf("stored env.flat_margin 0.25 at reward_scale 2 read as %g, greedy margin %g; want 0.25 and 0.5 in Q units", got.Env.FlatMargin, got.GreedyMargin())
	}
}
