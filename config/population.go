package config

import (
	"fmt"
	"reflect"
	"strings"
)

// Why the members of a population must agree on a field
// (PopulationError.Reason). ADR 0047 gives the reasoning field by field.
const (
	// ReasonShape: the field sets a tensor shape or the batch size, which
	// a batched backend allocates once for every member
	// (trainer.Population).
	ReasonShape = "it sets a tensor shape or the batch size"
	// ReasonKernel: the field selects the storage type, a kernel or the
	// graph that a batched backend runs for every member at once.
	ReasonKernel = "it selects the storage type, kernels or graph all members run in"
	// ReasonDataset: market.Prepare reads the field, and a population
	// trains every member on one Dataset.
	ReasonDataset = "the population's one dataset is prepared from it"
	// ReasonDriver: one call drives every member (the same steps, device
	// and schedule of epochs, checkpoints and backtests).
	ReasonDriver = "one call drives every member"
	// ReasonUnlisted: the field is not in PopulationMemberFields, and a
	// field nobody has classified is shared, so that a new field cannot
	// let members differ in a shape unnoticed.
	ReasonUnlisted = "it is not listed in config.PopulationMemberFields"
)

// PopulationMemberFields are the fields, by JSON path, in which the
// members of a population (trainer.Population) may differ: settings that
// enter the computation as scalars and change no tensor's shape, no
// dataset and no call's arguments. Every other field must be equal in
// all members (PopulationSharedFields says why; ValidatePopulation
// checks). The seed is one of them except on the synthetic series, whose
// bars it draws (ValidatePopulation).
var PopulationMemberFields = []string{
	"seed",
	"model.v_min", "model.v_max",
	"env.turnover_penalty", "env.risk_aversion", "env.reward_scale", "env.flat_margin",
	"env.epsilon_start", "env.epsilon_end", "env.epsilon_decay_fraction", "env.epsilon_decay_steps",
	"optim.lr", "optim.beta1", "optim.beta2", "optim.eps", "optim.weight_decay", "optim.clip_norm",
	"optim.spectral_bound", "optim.gamma", "optim.target_tau",
	"replay.alpha", "replay.beta0", "replay.beta_fraction", "replay.beta_steps", "replay.priority_eps",
}

// PopulationSharedFields are the fields, by JSON path, that must be equal
// in every member of a population, with the reason. Every data.* field is
// a dataset field (populationSharedPrefixes).
var PopulationSharedFields = map[string]string{
	"batch_size":                ReasonShape,
	"model.trunk1":              ReasonShape,
	"model.trunk2":              ReasonShape,
	"model.head":                ReasonShape,
	"model.atoms":               ReasonShape,
	"env.num_envs":              ReasonShape,
	"optim.n_step":              ReasonShape, // the collector's pending ring nstep.* is [num_envs, n_step]
	"replay.capacity":           ReasonShape,
	"precision":                 ReasonKernel,
	"optim.stochastic_rounding": ReasonKernel, // another weight-update kernel, not a scalar
	"readback_interval":         ReasonKernel, // the CUDA backend's graph of steps between reads

	"env.episode_bars":    ReasonDataset,
	"env.max_contracts":   ReasonDataset,
	"env.instrument":      ReasonDataset,
	"env.tick_size":       ReasonDataset,
	"env.slippage_ticks":  ReasonDataset,
	"env.commission":      ReasonDataset,
	"env.slippage_bps":    ReasonDataset,
	"env.commission_bps":  ReasonDataset,
	"env.margin_floor":    ReasonDataset,
	"env.point_value":     ReasonDataset,
	"env.sizing":          ReasonDataset,
	"env.target_vol":      ReasonDataset,
	"env.initial_capital": ReasonDataset,

	"epochs":               ReasonDriver,
	"steps_per_epoch":      ReasonDriver,
	"env.collect_steps":    ReasonDriver,
	"replay.warmup":        ReasonDriver, // Train's warm-up collection, the same for every member
	"device":               ReasonDriver,
	"blas":                 ReasonDriver,
	"checkpoint.every":     ReasonDriver,
	"checkpoint.keep_last": ReasonDriver,
	"checkpoint.keep_best": ReasonDriver,
	"checkpoint.dir":       ReasonDriver,
	"backtest.every":       ReasonDriver,
	"backtest.patience":    ReasonDriver,
	"backtest.min_valid_t": ReasonDriver,
}

// populationSharedPrefixes are sections every field of which is shared.
var populationSharedPrefixes = map[string]string{"data.": ReasonDataset}

// syntheticPath is prices.SyntheticPath (prices imports this package).
const syntheticPath = "synthetic"

// PopulationError is a field in which member Member of a population
// differs from member 0 although the members must agree on it.
type PopulationError struct {
	Member int    // index of the member, ≥ 1
	Field  string // JSON path, e.g. "model.atoms"
	Value  any    // the member's value
	First  any    // member 0's value
	Reason string // ReasonShape, ReasonDataset, ReasonDriver, ReasonUnlisted or the seed's
}

func (e *PopulationError) Error() string {
	return fmt.Sprintf("population member %d: config field %s = %v, member 0 has %v: the members of a population must agree on it (%s)",
		e.Member, e.Field, e.Value, e.First, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *PopulationError) Unwrap() error { return ErrInvalid }

// ValidatePopulation checks the configs of a population's members: each
// must be valid (the error names the member), and every field outside
// PopulationMemberFields must equal member 0's (a *PopulationError names
// the member, the field and both values). On the synthetic series
// (data.path "synthetic", no data.series) the seed draws the bars, so it
// must be equal too: a member's checkpoint must name the data it trained
// on.
func ValidatePopulation(members []RunConfig) error {
	if len(members) == 0 {
		return fmt.Errorf("%w: a population needs at least one member", ErrInvalid)
	}
	for k := range members {
		if err := members[k].Validate(); err != nil {
			return fmt.Errorf("population member %d: %w", k, err)
		}
	}
	first := populationFields(members[0])
	synthetic := members[0].Data.Path == syntheticPath && members[0].Data.Series == ""
	for k := 1; k < len(members); k++ {
		for i, f := range populationFields(members[k]) {
			v0 := first[i].value
			if reflect.DeepEqual(f.value, v0) {
				continue
			}
			reason, shared := PopulationReason(f.path)
			if f.path == "seed" && synthetic {
				reason, shared = `data.path "synthetic" draws the series from the seed`, true
			}
			if shared {
				return &PopulationError{Member: k, Field: f.path, Value: f.value, First: v0, Reason: reason}
			}
		}
	}
	return nil
}

// PopulationReason reports whether the members of a population must
// agree on the field at path (a JSON path such as "optim.lr") and why.
func PopulationReason(path string) (reason string, shared bool) {
	for _, m := range PopulationMemberFields {
		if m == path {
			return "", false
		}
	}
	if r, ok := PopulationSharedFields[path]; ok {
		return r, true
	}
	for p, r := range populationSharedPrefixes {
		if strings.HasPrefix(path, p) {
			return r, true
		}
	}
	return ReasonUnlisted, true
}

type populationField struct {
	path  string
	value any
}

// populationFields lists every leaf field of c with its JSON path, in
// declaration order.
func populationFields(c RunConfig) []populationField {
	var out []populationField
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if sf.Type.Kind() == reflect.Struct {
				walk(prefix+name+".", v.Field(i))
				continue
			}
			out = append(out, populationField{prefix + name, v.Field(i).Interface()})
		}
	}
	walk("", reflect.ValueOf(c))
	return out
}
