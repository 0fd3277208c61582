package config

import (
	"errors"
	"strings"
	"testing"
)

// TestEveryFieldHasAPopulationClass: each field of RunConfig is either a
// member setting or shared for a stated reason, so that a field added
// later is classified by someone who read ADR 0047, not by the fallback.
func TestEveryFieldHasAPopulationClass(t *testing.T) {
	member := map[string]bool{}
	for _, f := range PopulationMemberFields {
		if member[f] {
			t.Errorf("PopulationMemberFields lists %s twice", f)
		}
		member[f] = true
		if _, ok := PopulationSharedFields[f]; ok {
			t.Errorf("%s is both a member field and a shared one", f)
		}
	}
	paths := map[string]bool{}
	for _, f := range populationFields(Defaults()) {
		paths[f.path] = true
		if reason, _ := PopulationReason(f.path); reason == ReasonUnlisted {
			t.Errorf("config field %s has no population class: add it to PopulationMemberFields or PopulationSharedFields", f.path)
		}
	}
	for f := range member {
		if !paths[f] {
			t.Errorf("PopulationMemberFields names %s, which RunConfig does not have", f)
		}
	}
	for f := range PopulationSharedFields {
		if !paths[f] {
			t.Errorf("PopulationSharedFields names %s, which RunConfig does not have", f)
		}
	}
}

// TestValidatePopulationNamesMemberAndField: a member differing from
// member 0 in a shared field is refused with the member, the field, both
// values and the reason; differences in member fields are accepted.
func TestValidatePopulationNamesMemberAndField(t *testing.T) {
	base := Defaults()
	base.Data.Path = "bundled:bitcoin_2024.csv"
	member := func(edit func(*RunConfig)) RunConfig {
		c := base
		edit(&c)
		return c
	}
	cases := []struct {
		name  string
		edit  func(*RunConfig)
		field string // "" when the population is valid
		want  []string
	}{
		{"member settings differ", func(c *RunConfig) {
			c.Seed, c.Optim.LR, c.Optim.Gamma, c.Optim.TargetTau = 7, 3e-4, 0.95, 0.25
			c.Env.RiskAversion, c.Env.TurnoverPenalty, c.Env.EpsilonEnd = 0.1, 0.1, 0.1
		}, "", nil},
		{"atoms", func(c *RunConfig) { c.Model.Atoms = 21 }, "model.atoms", []string{"= 21", "member 0 has 51", ReasonShape}},
		{"batch size", func(c *RunConfig) { c.BatchSize = 128 }, "batch_size", []string{"= 128", "has 256"}},
		{"envs", func(c *RunConfig) { c.Env.NumEnvs = 8 }, "env.num_envs", []string{"= 8", "has 32"}},
		{"capacity", func(c *RunConfig) { c.Replay.Capacity = 5000 }, "replay.capacity", []string{"= 5000"}},
		{"precision", func(c *RunConfig) { c.Precision = PrecisionBF16 }, "precision", []string{"= bf16", "has fp32", ReasonKernel}},
		{"n-step", func(c *RunConfig) { c.Optim.NStep = 5 }, "optim.n_step", []string{"= 5", "has 3"}},
		{"commission", func(c *RunConfig) { c.Env.CommissionBps = 2 }, "env.commission_bps", []string{ReasonDataset}},
		{"data", func(c *RunConfig) { c.Data.TrainFraction = 0.6 }, "data.train_fraction", []string{ReasonDataset}},
		{"epochs", func(c *RunConfig) { c.Epochs = 3 }, "epochs", []string{ReasonDriver}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePopulation([]RunConfig{base, base, member(tc.edit)})
			if tc.field == "" {
				if err != nil {
					t.Fatalf("ValidatePopulation: %v", err)
				}
				return
			}
			var pe *PopulationError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("ValidatePopulation returned %v, want a *PopulationError wrapping ErrInvalid", err)
			}
			if pe.Member != 2 || pe.Field != tc.field {
				t.Errorf("error names member %d field %s, want member 2 field %s", pe.Member, pe.Field, tc.field)
			}
			for _, w := range append([]string{"member 2", tc.field}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestValidatePopulationSeedDrawsTheSyntheticSeries: on the synthetic
// series the seed is shared, elsewhere a member setting; an invalid
// member is named.
func TestValidatePopulationSeedDrawsTheSyntheticSeries(t *testing.T) {
	a := Defaults()
	a.Data.Path = "synthetic"
	b := a
	b.Seed = 2
	err := ValidatePopulation([]RunConfig{a, b})
	if err == nil || !strings.Contains(err.Error(), "member 1: config field seed = 2") || !strings.Contains(err.Error(), "synthetic") {
		t.Errorf("seeds 1 and 2 on the synthetic series: %v, want an error naming member 1, the seed and the synthetic series", err)
	}
	bad := a
	bad.Optim.LR = 2
	err = ValidatePopulation([]RunConfig{a, bad})
	if err == nil || !strings.Contains(err.Error(), "population member 1: config field optim.lr") {
		t.Errorf("member 1 with lr 2: %v, want an error naming member 1 and optim.lr", err)
	}
	if err := ValidatePopulation(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("no members: %v, want ErrInvalid", err)
	}
}
