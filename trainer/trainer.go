// Package trainer defines the Trainer interface that the activities and the
// CLI use, whatever backend runs it: the CPU backend and reference in trainer/cpu or
// the CUDA backend in gpu/. Both pass the conformance suite in
// trainer/trainertest.
//
// A Trainer owns all of its state (weights, optimiser moments, replay
// buffer, environments, random streams), possibly in device memory, and runs
// whole collection and training phases without the caller in the loop: the
// caller sees progress through a callback and the state through Snapshot.
package trainer

import (
	"context"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// Info reports what a trainer really runs: a precision label is a claim, so
// it comes from the backend that measured it, not from the config.
type Info struct {
	Backend      string `json:"backend"`       // "cpu" or "cuda"
	Device       string `json:"device"`        // e.g. "cpu (2 threads)", "NVIDIA H200"
	Precision    string `json:"precision"`     // mode that runs: fp32, bf16-mixed, bf16
	StorageDType string `json:"storage_dtype"` // weights and activations entering GEMMs: "f32" or "bf16"
	// StateDType is how the trained state is stored: parameters, Adam
	// moments and gradients; "f32" in fp32 and bf16-mixed (float32
	// masters), "bf16" in bf16. With stochastic rounding of the weight
	// update it reads "bf16 (stochastic rounding)".
	StateDType   string `json:"state_dtype,omitempty"`
	ComputeDType string `json:"compute_dtype"` // GEMM accumulation: "f32"
	Parameters   int    `json:"parameters"`    // trainable parameters of the online network
	// BLAS is the matrix library the CPU backend's GEMMs run on, with its
	// version, CPU kernel, who chose it and thread count (e.g. "openblas
	// 0.3.21 (Cooperlake kernels: detected by OpenBLAS; pthreads, 2
	// threads, libopenblas.so.0)"); empty
	// for the CUDA backend. Device repeats it, so the run's row shows it.
	BLAS string `json:"blas,omitempty"`
	// Threads is the number of threads the GEMMs may use (CPU backend).
	Threads int `json:"threads,omitempty"`
	// SelfCheck is what the backend measured at start-up to back the
	// precision claim (the CUDA backend runs its GEMM on operands whose
	// result tells bf16 from float32 storage and accumulation).
	SelfCheck string `json:"self_check,omitempty"`
	// Tuning is the backend's tuning as JSON (the CUDA backend's
	// gpu.Tuning: GEMM paths, steps a graph, loss slots, block sizes,
	// backtest mode), so that a run can be repeated from its record;
	// empty for a backend without one.
	Tuning string `json:"tuning,omitempty"`
}

// Progress is reported during Train at most every few steps.
type Progress struct {
	Step       int     `json:"step"`        // steps done in this call
	Steps      int     `json:"steps"`       // steps asked for in this call
	GlobalStep int64   `json:"global_step"` // gradient steps since the run began
	Loss       float64 `json:"loss"`        // mean loss over the steps since the last report
	GradNorm   float64 `json:"grad_norm"`   // mean global gradient norm (before clipping), likewise
}

// CollectStats summarises one Collect call.
type CollectStats struct {
	EnvSteps    int64   `json:"env_steps"`   // environment steps since the run began (all envs)
	Transitions int     `json:"transitions"` // transitions added by this call
	BufferSize  int     `json:"buffer_size"` // transitions in the replay buffer
	Epsilon     float64 `json:"epsilon"`     // exploration rate at the end of the call
	MeanReward  float64 `json:"mean_reward"` // mean per-step reward in this call
	Episodes    int     `json:"episodes"`    // episodes finished in this call
}

// TrainStats summarises one Train call.
type TrainStats struct {
	Steps      int     `json:"steps"`
	GlobalStep int64   `json:"global_step"`
	Loss       float64 `json:"loss"`      // mean loss over the call
	GradNorm   float64 `json:"grad_norm"` // mean global gradient norm over the call
	// MeanQ is the online network's expected Q of the actions taken in
	// the call's last batch, after the call, averaged over the batch and
	// the three branches: the value estimate whose drift shows
	// over-estimation. Nil when the backend does not measure it.
	MeanQ *float64 `json:"mean_q,omitempty"`
	// GradNormMax is the largest global gradient norm (before clipping)
	// of the call's steps.
	GradNormMax float64 `json:"grad_norm_max,omitempty"`
	// Stagnation is the share of the call's parameter updates that the
	// rounding of the stored parameter absorbed: updates whose computed
	// change is not zero but after which the stored weight or bias is the
	// same value (docs/precision.md). Near 0 in fp32 and bf16-mixed, whose
	// masters are float32; the figure that matters in bf16, with and
	// without optim.stochastic_rounding. Nil when the backend does not
	// measure it.
	Stagnation *float64 `json:"stagnation,omitempty"`
}

// Trainer is one run's learner. Methods are not safe for concurrent use.
// Every method that computes returns an error rather than a non-finite
// result: a NaN or Inf loss or gradient stops Train with ErrNonFinite.
type Trainer interface {
	// Info reports the backend, device and precision that run.
	Info() Info
	// Collect runs steps environment steps in each parallel environment with
	// the epsilon-greedy policy and adds the n-step transitions to replay.
	Collect(ctx context.Context, steps int) (CollectStats, error)
	// Train runs steps gradient steps. progress, if not nil, is called at
	// most every few steps and after the last one.
	Train(ctx context.Context, steps int, progress func(Progress)) (TrainStats, error)
	// SyncTarget moves the target network towards the online network:
	// target ← τ·online + (1−τ)·target, τ = optim.target_tau.
	SyncTarget() error
	// Snapshot copies everything an exact resume needs into host memory.
	// The caller adds the run id and epoch to its metadata.
	Snapshot() (*checkpoint.Checkpoint, error)
	// Backtest runs the greedy policy over bars r of ds.
	Backtest(ctx context.Context, ds *market.Dataset, r market.Range) (sim.Report, error)
	// Close frees the trainer's memory; the trainer is unusable afterwards.
	Close() error
}

// MemoryReporter is implemented by trainers on a device with memory of
// its own (the CUDA backend): the device's memory in use and in all, in
// bytes, for the worker's metrics.
type MemoryReporter interface {
	DeviceMemory() (used, total uint64, err error)
}

// Capturer is implemented by trainers whose Snapshot spends most of its
// time encoding a state it has already copied (the CUDA backend: the
// device's state downloads in about 2 ms, then the host checks and
// encodes a 100,000-transition replay buffer in about 12). Capture copies
// the state at once, and the trainer may go on training as soon as it
// returns; the function it returns builds the same checkpoint Snapshot
// would have, from that copy, on any goroutine, once. RunEpochs encodes
// and writes a chunk's checkpoints in the background this way.
type Capturer interface {
	Capture() (encode func() (*checkpoint.Checkpoint, error), err error)
}

// Backend creates trainers of one kind.
type Backend interface {
	// New builds a trainer for cfg on ds. Its weights are fresh, or, when
	// warm is not nil, the online and target weights of that checkpoint
	// (a warm start: optimiser, replay and environments start fresh).
	New(ctx context.Context, cfg config.RunConfig, ds *market.Dataset, warm *checkpoint.Checkpoint) (Trainer, error)
	// Restore rebuilds the trainer saved in ck, on ds, exactly: continuing
	// it gives the same results, bit for bit, as never having stopped.
	Restore(ctx context.Context, ck *checkpoint.Checkpoint, ds *market.Dataset) (Trainer, error)
}

// StateDType is Info.StateDType for a precision mode and the
// optim.stochastic_rounding setting.
func StateDType(precision string, stochastic bool) string {
	switch {
	case precision != config.PrecisionBF16:
		return "f32"
	case stochastic:
		return "bf16 (stochastic rounding)"
	}
	return "bf16"
}
