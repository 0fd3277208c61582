package gpu

import "github.com/dqnflow/dqnflow/gpu/device"

// Tuning is the one value that says how the backend runs what it
// computes (ADR 0042): every knob, its default and its override. It is
// defined in package device, below the step and the environment that
// read it; this is its name for the packages that use the backend.
type Tuning = device.Tuning

// FieldError is a Tuning field's bad value (device.FieldError).
type FieldError = device.FieldError

// DefaultTuning is today's measured defaults (device.DefaultTuning).
func DefaultTuning() Tuning { return device.DefaultTuning() }

// TuningFromEnv is DefaultTuning with the DQNFLOW_* overrides of the
// environment (device.TuningFromEnv, the one reader).
func TuningFromEnv() (Tuning, error) { return device.TuningFromEnv() }
