// Package device owns an opened CUDA device and what every part of the
// backend does on it: Open (once per process per ordinal, with its NVRTC
// compiler), the Tuning and its resolution on the device (Setup: whether
// kernels launch as programmatic dependents, whether the GEMMs have
// wgmma), the compiled modules kept per key (Load), the self-check
// results kept per module (Checked), device memory in arenas freed
// together, kernel launches with their argument words (Words: every
// argument struct of the kernels is 64-bit words), CUDA graph capture and
// the clock that times phases on a stream.
//
// Tuning and TuningFromEnv live here, below the step and the environment
// that read them; package gpu names them gpu.Tuning and gpu.TuningFromEnv
// (ADR 0042, ADR 0044).
package device
