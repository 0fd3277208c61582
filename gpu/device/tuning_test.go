package device

import (
	"errors"
	"strings"
	"testing"
)

// TestDefaultTuningIsTodaysDefaults pins every default to the value the
// field's doc comment gives (and the measurements behind it), and checks
// that the defaults validate and that the environment, when it sets
// nothing, changes none of them.
func TestDefaultTuningIsTodaysDefaults(t *testing.T) {
	want := Tuning{FP32GEMM: "3xtf32", WGMMA: "auto", WGMMADX: "off", PDL: "auto", StepsPerGraph: 8,
		LossSlots: 4 * 8 * 132, GradKChunk: 0, EnvBlock: 64, Backtest: "batch", HeadOutShape: ""}
	if got := DefaultTuning(); got != want {
		t.Fatalf("DefaultTuning() = %+v, want %+v", got, want)
	}
	if err := DefaultTuning().Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	got, err := tuningFrom(func(string) string { return "" })
	if err != nil || got != want {
		t.Fatalf("tuningFrom(empty environment) = %+v, %v; want the defaults", got, err)
	}
	if r := DefaultTuning().Record(); !strings.Contains(r, `"steps_per_graph":8`) || strings.Contains(r, "kernel_cache") {
		t.Errorf("record %s: want the fields by their JSON names, the kernel cache left out", r)
	}
}

// TestTuningRefusesBadValuesNamingTheField: each bad value fails Validate
// with a *FieldError that names its field, and only that field.
func TestTuningRefusesBadValuesNamingTheField(t *testing.T) {
	for _, c := range []struct {
		field string
		bad   func(*Tuning)
	}{
		{"fp32_gemm", func(t *Tuning) { t.FP32GEMM = "tf32" }},
		{"fp32_gemm", func(t *Tuning) { t.FP32GEMM = "" }},
		{"wgmma", func(t *Tuning) { t.WGMMA = "yes" }},
		{"wgmma_dx", func(t *Tuning) { t.WGMMADX = "always" }},
		{"pdl", func(t *Tuning) { t.PDL = "early" }}, // removed: measured slower (ADR 0019)
		{"steps_per_graph", func(t *Tuning) { t.StepsPerGraph = 0 }},
		{"steps_per_graph", func(t *Tuning) { t.StepsPerGraph = maxStepsPerGraph + 1 }},
		{"loss_slots", func(t *Tuning) { t.LossSlots = 0 }},
		{"loss_slots", func(t *Tuning) { t.LossSlots = 1<<16 + 1 }},
		{"grad_kchunk", func(t *Tuning) { t.GradKChunk = 32 }},
		{"grad_kchunk", func(t *Tuning) { t.GradKChunk = 100 }},
		{"env_block", func(t *Tuning) { t.EnvBlock = 16 }},
		{"env_block", func(t *Tuning) { t.EnvBlock = 100 }},
		{"env_block", func(t *Tuning) { t.EnvBlock = 2048 }},
		{"backtest", func(t *Tuning) { t.Backtest = "cluster" }},
		{"headout_shape", func(t *Tuning) { t.HeadOutShape = "gemm128p" }}, // removed: measured slower
	} {
		tu := DefaultTuning()
		c.bad(&tu)
		err := tu.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || len(unjoin(err)) != 1 {
			t.Errorf("%+v: Validate() = %v; want one error for field %s", tu, err, c.field)
			continue
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("field %s: error %q does not name it", c.field, err)
		}
	}
	for _, ok := range []func(*Tuning){
		func(t *Tuning) { t.FP32GEMM = "simt" },
		func(t *Tuning) { t.WGMMA, t.PDL, t.WGMMADX = "off", "off", "fill" },
		func(t *Tuning) { t.StepsPerGraph, t.LossSlots, t.GradKChunk, t.EnvBlock = 1, 924, 128, 1024 },
		func(t *Tuning) { t.Backtest, t.HeadOutShape = "kernel", "gemm128x64o" },
	} {
		tu := DefaultTuning()
		ok(&tu)
		if err := tu.Validate(); err != nil {
			t.Errorf("%+v: %v", tu, err)
		}
	}
}

// TestTuningFromEnvOverridesTheDefaults: each variable of tuningEnv sets
// its field, unset or empty ones leave the default, and a bad value is an
// error naming both the variable and the field.
func TestTuningFromEnvOverridesTheDefaults(t *testing.T) {
	env := map[string]string{
		"DQNFLOW_FP32_GEMM": "simt", "DQNFLOW_WGMMA": "off", "DQNFLOW_WGMMA_DX": "fill", "DQNFLOW_PDL": "on",
		"DQNFLOW_STEPS_PER_GRAPH": "4", "DQNFLOW_LOSS_SLOTS": "924", "DQNFLOW_GRAD_KCHUNK": "128",
		"DQNFLOW_ENV_BLOCK": "32", "DQNFLOW_BACKTEST": "kernel", "DQNFLOW_HEADOUT_SHAPE": "gemm64",
		"DQNFLOW_KERNEL_CACHE": "/k",
	}
	if len(env) != len(tuningEnv) {
		t.Fatalf("the test sets %d variables, tuningEnv has %d", len(env), len(tuningEnv))
	}
	got, err := tuningFrom(func(k string) string { return env[k] })
	want := Tuning{FP32GEMM: "simt", WGMMA: "off", WGMMADX: "fill", PDL: "on", StepsPerGraph: 4, LossSlots: 924,
		GradKChunk: 128, EnvBlock: 32, Backtest: "kernel", HeadOutShape: "gemm64", KernelCache: "/k"}
	if err != nil || got != want {
		t.Fatalf("tuningFrom = %+v, %v; want %+v", got, err, want)
	}
	for _, c := range []struct{ env, v, field string }{
		{"DQNFLOW_STEPS_PER_GRAPH", "65", "steps_per_graph"},
		{"DQNFLOW_STEPS_PER_GRAPH", "four", "steps_per_graph"},
		{"DQNFLOW_ENV_BLOCK", "100", "env_block"},
		{"DQNFLOW_FP32_GEMM", "3xTF32", "fp32_gemm"},
		{"DQNFLOW_PDL", "early", "pdl"},
		{"DQNFLOW_GRAD_KCHUNK", "-64", "grad_kchunk"},
	} {
		_, err := tuningFrom(func(k string) string {
			if k == c.env {
				return c.v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), c.env) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s=%s: error %v; want one naming %s and %s", c.env, c.v, err, c.env, c.field)
		}
	}
}
