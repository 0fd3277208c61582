package device

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/kernels"
	"os"
	"path/filepath"
	"strconv"
)

// Tuning is every knob of the CUDA backend that changes how a step runs
// on the device (and, for a few, which bits it computes) without being a
// setting of the run: the GEMM paths, the graphs, the launch partitions,
// the block sizes and the backtest. DefaultTuning is what runs unless
// someone asks for something else; each field's doc gives the measurement
// that made its default the default. A Backend takes one Tuning when it is
// built (NewBackend) and keeps it; nothing in the package reads the
// environment but TuningFromEnv, which the CLI and the worker call.
//
// The trainer records its Tuning as JSON in trainer.Info.Tuning and in
// every checkpoint's metadata (checkpoint.MetaTuning), beside the
// precision, so that a run can be repeated from its record.
type Tuning struct {
	// FP32GEMM is where fp32 modules run the GEMMs' products: "3xtf32"
	// (the default: three TF32 products each on the tensor cores,
	// kernels/gemm.cu gemmTf32, sm_80 or newer) or "simt" (fmaf on the
	// CUDA cores). Measured on an H200 (ADR 0021): the same tests pass at
	// the same tolerances, and a step takes 1.35 against 1.85 ms at batch
	// 16384, 0.46 against 0.61 at 4096 and 0.154 against 0.158 at 256.
	// "simt" is kept for devices older than sm_80. DQNFLOW_FP32_GEMM.
	FP32GEMM string `json:"fp32_gemm"`
	// WGMMA is whether bf16 and 3xTF32 fp32 modules run the forward GEMMs
	// on Hopper's warpgroup MMA (useWGMMA, ADR 0020): "auto" (the default:
	// where it can be had, sm_90 with NVRTC 12 or newer), "on" (an error
	// where it cannot be had) or "off" (mma.sync). DQNFLOW_WGMMA.
	WGMMA string `json:"wgmma"`
	// WGMMADX says when the backward's input gradients leave their stage's
	// mma.sync launch for wgmma against transposed weight copies (ADR
	// 0023): "off" (the default), "fill" (when the jobs that fit fill the
	// GPU) or "on" (whenever some fit). DQNFLOW_WGMMA_DX.
	WGMMADX string `json:"wgmma_dx"`
	// PDL is how the kernels of the trainer's graphs follow each other
	// (dependentLaunches, ADR 0019): "auto" (the default: programmatic
	// dependent launches on sm_90 with cuLaunchKernelEx, else one after
	// the other), "on" (an error where they cannot be had) or "off" (one
	// after the other). DQNFLOW_PDL.
	PDL string `json:"pdl"`
	// StepsPerGraph is how many training steps one launch of the training
	// graph replays, 1 to maxStepsPerGraph (default 8: graphs of 8 steps
	// took 1.3–3.5 µs off a step at batches 256 and 4096 on an H100, and
	// 32 saved no more at batch 256; ADR 0027). The same bits for every
	// value. DQNFLOW_STEPS_PER_GRAPH.
	StepsPerGraph int `json:"steps_per_graph"`
	// LossSlots is the most c51_loss blocks a step launches (lossRows),
	// default lossSlots (four waves of an H200's blocks). The loss's bias
	// sums, and so the bits, follow it. DQNFLOW_LOSS_SLOTS.
	LossSlots int `json:"loss_slots"`
	// GradKChunk, when positive, is the rows per split of the weight
	// gradients' k-split (a multiple of 32 from 64) in place of the plan's
	// own; 0, the default, is the plan's. It changes only the order in
	// which partial sums are added: the control of the precision study
	// (ADR 0017), and Info.ComputeDType says so. DQNFLOW_GRAD_KCHUNK.
	GradKChunk int `json:"grad_kchunk,omitempty"`
	// EnvBlock is the block of the collector's one-thread-per-environment
	// kernels (envBlock): a multiple of 32 from 32 to 1024, default 64.
	// Measured on an H200 (2026-12-03, docs/perf): env_step at 4,096
	// environments takes 16.8 µs in blocks of 256, 10.4 in 128, 8.4 in 64
	// and 8.2 in 32. DQNFLOW_ENV_BLOCK.
	EnvBlock int `json:"env_block"`
	// Backtest is how the greedy backtest runs (ADR 0015): "batch" (the
	// default, sim.BacktestBatch with the device network's decisions)
	// or "kernel" (ADR 0012's bt_run kernels, for the comparison in
	// visit.sh epoch). DQNFLOW_BACKTEST.
	Backtest string `json:"backtest"`
	// HeadOutShape, when set, is the name of the gemm tile shape of the
	// head outputs' forward launch, for the benchmark that compares shapes
	// there (tools/device/visit.sh, part headout); empty, the default, is
	// gemmCall's choice. DQNFLOW_HEADOUT_SHAPE.
	HeadOutShape string `json:"headout_shape,omitempty"`
	// KernelCache is the folder of compiled kernels: empty (the default)
	// is dqnflow/kernels under the user cache folder, or the temporary
	// folder. It changes nothing the device computes, so no record keeps
	// it. DQNFLOW_KERNEL_CACHE.
	KernelCache string `json:"-"`

	// MmaOnly keeps the forward GEMMs on mma.sync where the module has
	// wgmma (TestWGMMATrainsLikeMMA).
	MmaOnly bool
}

// maxStepsPerGraph bounds Tuning.StepsPerGraph: a graph of 18 launches a
// step stays under about 1,200 nodes, and a readback chunk (histCap) is
// longer than a graph.
const maxStepsPerGraph = 64

// lossSlots is the most c51_loss blocks a step launches: four waves of
// the blocks an H200 holds at once, 8 a SM on 132 SMs. (Its
// __launch_bounds__ keeps it within 40 registers, so that eight blocks of
// 192 threads fit the register file, and eight blocks' 13 KB of shared
// memory and the 1 KB each reserves fit the 132 KB carveout.)
// Each block adds its rows' bias gradients into one part (lossRows), so
// fewer blocks mean fewer parts for grad_reduce, and more blocks a
// shorter tail: at batch 16384 the step took 0.594–0.595 ms with one
// wave, 0.592 with two, 0.589–0.591 with four and 0.591 with eight (the
// 2026-12-03 evening report, call 4). It is a constant, not the device's
// count, so that the sums' order, and so the bits, depend on the batch
// only.
const lossSlots = 4 * 8 * 132

// DefaultTuning is the tuning every run gets unless it asks for another:
// each field's default is documented on the field.
func DefaultTuning() Tuning {
	return Tuning{
		FP32GEMM:      "3xtf32",
		WGMMA:         "auto",
		WGMMADX:       "off",
		PDL:           "auto",
		StepsPerGraph: 8,
		LossSlots:     lossSlots,
		EnvBlock:      64,
		Backtest:      "batch",
	}
}

// Validate reports every field that holds a value the backend does not
// run, each error naming the field (its JSON name).
func (t Tuning) Validate() error {
	var errs []error
	oneOf := func(field, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		errs = append(errs, fieldErr(field, "%q: must be one of %q", v, allowed))
	}
	oneOf("fp32_gemm", t.FP32GEMM, "3xtf32", "simt")
	oneOf("wgmma", t.WGMMA, "auto", "on", "off")
	oneOf("wgmma_dx", t.WGMMADX, "off", "fill", "on")
	oneOf("pdl", t.PDL, "auto", "on", "off")
	oneOf("backtest", t.Backtest, "batch", "kernel")
	if t.StepsPerGraph < 1 || t.StepsPerGraph > maxStepsPerGraph {
		errs = append(errs, fieldErr("steps_per_graph", "%d: must be a whole number of steps from 1 to %d (default 8)", t.StepsPerGraph, maxStepsPerGraph))
	}
	if t.LossSlots < 1 || t.LossSlots > 1<<16 {
		errs = append(errs, fieldErr("loss_slots", "%d: must be a block count from 1 to 65536 (default %d)", t.LossSlots, lossSlots))
	}
	if t.GradKChunk != 0 && (t.GradKChunk < 64 || t.GradKChunk%32 != 0) {
		errs = append(errs, fieldErr("grad_kchunk", "%d: must be 0 (the plan's own) or a multiple of 32, at least 64", t.GradKChunk))
	}
	if t.EnvBlock < 32 || t.EnvBlock > 1024 || t.EnvBlock%32 != 0 {
		errs = append(errs, fieldErr("env_block", "%d: must be a multiple of 32 from 32 to 1024 (default 64)", t.EnvBlock))
	}
	if t.HeadOutShape != "" {
		if _, err := kernels.ShapeNamed(true, true, t.HeadOutShape); err != nil {
			errs = append(errs, fieldErr("headout_shape", "%q: %v", t.HeadOutShape, err))
		}
	}
	return errors.Join(errs...)
}

// FieldError is a Tuning field's bad value: Field is its JSON name.
type FieldError struct {
	Field string
	msg   string
}

func (e *FieldError) Error() string { return "gpu tuning " + e.Field + " = " + e.msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, msg: fmt.Sprintf(format, args...)}
}

// tuningEnv names the environment variable of each field TuningFromEnv
// reads, with the field's JSON name.
var tuningEnv = []struct{ env, field string }{
	{"DQNFLOW_FP32_GEMM", "fp32_gemm"},
	{"DQNFLOW_WGMMA", "wgmma"},
	{"DQNFLOW_WGMMA_DX", "wgmma_dx"},
	{"DQNFLOW_PDL", "pdl"},
	{"DQNFLOW_STEPS_PER_GRAPH", "steps_per_graph"},
	{"DQNFLOW_LOSS_SLOTS", "loss_slots"},
	{"DQNFLOW_GRAD_KCHUNK", "grad_kchunk"},
	{"DQNFLOW_ENV_BLOCK", "env_block"},
	{"DQNFLOW_BACKTEST", "backtest"},
	{"DQNFLOW_HEADOUT_SHAPE", "headout_shape"},
	{"DQNFLOW_KERNEL_CACHE", "kernel_cache"},
}

// TuningFromEnv is DefaultTuning with each field whose environment
// variable (tuningEnv) is set and not empty replaced by its value, then
// validated. It is the only reader of the environment in this package:
// the CLI and the worker call it once and pass the result to NewBackend.
// An error names the variable and the field.
func TuningFromEnv() (Tuning, error) {
	return tuningFrom(os.Getenv)
}

// tuningFrom is TuningFromEnv with getenv for the environment.
func tuningFrom(getenv func(string) string) (Tuning, error) {
	t := DefaultTuning()
	var errs []error
	for _, e := range tuningEnv {
		v := getenv(e.env)
		if v == "" {
			continue
		}
		num := func(dst *int) {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", e.env, fieldErr(e.field, "%q: must be a whole number", v)))
				return
			}
			*dst = n
		}
		switch e.field {
		case "fp32_gemm":
			t.FP32GEMM = v
		case "wgmma":
			t.WGMMA = v
		case "wgmma_dx":
			t.WGMMADX = v
		case "pdl":
			t.PDL = v
		case "steps_per_graph":
			num(&t.StepsPerGraph)
		case "loss_slots":
			num(&t.LossSlots)
		case "grad_kchunk":
			num(&t.GradKChunk)
		case "env_block":
			num(&t.EnvBlock)
		case "backtest":
			t.Backtest = v
		case "headout_shape":
			t.HeadOutShape = v
		case "kernel_cache":
			t.KernelCache = v
		}
	}
	if err := errors.Join(errs...); err != nil {
		return t, err
	}
	if err := t.Validate(); err != nil {
		// Each field's error, prefixed with the variable that set it.
		var out []error
		for _, fe := range unjoin(err) {
			var f *FieldError
			if errors.As(fe, &f) {
				for _, e := range tuningEnv {
					if e.field == f.Field {
						fe = fmt.Errorf("%s: %w", e.env, fe)
					}
				}
			}
			out = append(out, fe)
		}
		return t, errors.Join(out...)
	}
	return t, nil
}

// unjoin is the errors that errors.Join joined into err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// CacheDir is where compiled kernels are kept: KernelCache, or
// dqnflow/kernels under the user cache folder, or the temporary folder.
func (t Tuning) CacheDir() string {
	if t.KernelCache != "" {
		return t.KernelCache
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dqnflow", "kernels")
	}
	return filepath.Join(os.TempDir(), "dqnflow-kernels")
}

// TC reports whether fp32 modules run their GEMM products as 3xTF32.
func (t Tuning) TC() bool { return t.FP32GEMM != "simt" }

// Record is the tuning as the JSON that trainer.Info.Tuning and the
// checkpoint metadata keep.
func (t Tuning) Record() string {
	b, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("marshal gpu tuning: %v", err)) // strings and numbers
	}
	return string(b)
}
