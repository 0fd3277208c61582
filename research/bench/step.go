// Package bench measures dqnflow's speed: the training step, the bare
// environment and the collector on a device, beside the PyTorch CPU
// reference of the same step (Step, PyTorch); the default epoch end to
// end on a CUDA device (Epoch); and the overhead Temporal adds per epoch
// on a running server (Temporal). Each returns its result as a value
// the command prints as text or JSON.
package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// StepResult is what "dqnflow bench --json" prints.
type StepResult struct {
	Date      string `json:"date"`
	Device    string `json:"device"`
	Backend   string `json:"backend"`
	Precision string `json:"precision"`
	Threads   int    `json:"threads"`
	// BLAS is the matrix library of the CPU backend, with its version, CPU
	// kernel and threads (trainer.Info.BLAS).
	BLAS       string `json:"blas,omitempty"`
	Parameters int    `json:"parameters"`
	BatchSize  int    `json:"batch_size"`
	NumEnvs    int    `json:"num_envs"`
	// TrainStepsPerS is gradient steps per second (sample, forward, backward,
	// Adam, spectral norm, priority update).
	TrainStepsPerS float64 `json:"train_steps_per_s"`
	// SamplesPerS is TrainStepsPerS × batch size.
	SamplesPerS float64 `json:"samples_per_s"`
	// EnvStepsPerS is environment steps per second of the bare vectorised
	// environment with random actions.
	EnvStepsPerS float64 `json:"env_steps_per_s"`
	// CollectStepsPerS is environment steps per second of Collect: the
	// epsilon-greedy policy's forward pass, the environment, n-step returns
	// and replay inserts (epsilon fixed at epsilon_end, so the network runs).
	CollectStepsPerS float64 `json:"collect_steps_per_s"`
	// MsPerStep is the wall time of one gradient step inside a Train call
	// of --steps steps, host synchronisation and read-backs included.
	MsPerStep float64 `json:"ms_per_step"`
	// MsPer300StepEpoch is 300·MsPerStep: the default epoch's training.
	MsPer300StepEpoch float64 `json:"ms_per_300_step_epoch"`
	// GEMMTFLOPs is the GEMM work of a step over MsPerStep (CUDA only).
	GEMMTFLOPs float64 `json:"gemm_tflop_s,omitempty"`
	// Forward says how the CUDA forward pass ran: "layered" (four GEMM
	// launches) and the GEMM path, gpu/forward.go.
	Forward string `json:"forward,omitempty"`
	// Launches says how the kernels of the CUDA training graph follow each
	// other: "programmatic dependent", or "serial: " and why.
	Launches string `json:"launches,omitempty"`
	// StepsPerGraph is how many training steps one launch of the CUDA
	// training graph replays (DQNFLOW_STEPS_PER_GRAPH, ADR 0027).
	StepsPerGraph int `json:"steps_per_graph,omitempty"`
	// Tuning is the CUDA backend's whole tuning (gpu.Tuning as JSON), as
	// trainer.Info.Tuning.
	Tuning string `json:"tuning,omitempty"`
	// SelfCheck is the backend's measured precision check.
	SelfCheck string `json:"self_check,omitempty"`
	// Kernels is the device time of each launch of a step (CUDA only).
	Kernels []gpu.KernelTime `json:"kernels,omitempty"`
	// KernelsInSitu is each launch's share of the step where it runs in
	// the step, after the launches before it (CUDA only; gpu.ProfileStepInSitu).
	KernelsInSitu []gpu.KernelTime `json:"kernels_in_situ,omitempty"`
	// PyTorch is the PyTorch CPU reference of the same step at the same
	// batch size and thread count, run after ours (CPU only).
	PyTorch *PyTorch `json:"pytorch,omitempty"`
}

// StepOptions are the inputs of Step.
type StepOptions struct {
	// Backend trains on Device (its summary, for the record); Config and
	// Dataset are the run timed, its epsilon at epsilon_end.
	Backend trainer.Backend
	Device  string
	Config  config.RunConfig
	Dataset *market.Dataset
	// Steps is how many gradient steps are timed; Profile times every
	// CUDA kernel of a step.
	Steps   int
	Profile bool
	// PyTorchMode (auto, on or off) and Python run the PyTorch reference
	// on the CPU in fp32; TorchVersion and TorchErr are what ProbeTorch
	// found before anything was timed.
	PyTorchMode, Python string
	TorchVersion        string
	TorchErr            error
	// Stderr receives what the backend says it runs with.
	Stderr io.Writer
}

// Step times the training step, the bare environment and the collector
// of o.
func Step(ctx context.Context, o StepOptions) (StepResult, error) {
	cfg, ds := o.Config, o.Dataset
	res := StepResult{
		Date: time.Now().UTC().Format(time.RFC3339), Device: o.Device, Threads: runtime.GOMAXPROCS(0),
		BatchSize: cfg.BatchSize, NumEnvs: cfg.Env.NumEnvs,
	}
	var err error
	if res.EnvStepsPerS, err = envStepsPerS(ds, cfg); err != nil {
		return res, err
	}
	tr, err := o.Backend.New(ctx, cfg, ds, nil)
	if err != nil {
		return res, err
	}
	defer tr.Close()
	info := tr.Info()
	res.Backend, res.Precision, res.Parameters, res.BLAS = info.Backend, info.Precision, info.Parameters, info.BLAS
	if info.Threads > 0 {
		res.Threads = info.Threads
	}
	if info.BLAS != "" {
		fmt.Fprintf(o.Stderr, "blas: %s\n", info.BLAS)
	}

	collect := max(cfg.Replay.Warmup/cfg.Env.NumEnvs, 1)
	t0 := time.Now()
	if _, err := tr.Collect(ctx, collect); err != nil {
		return res, err
	}
	res.CollectStepsPerS = float64(collect*cfg.Env.NumEnvs) / time.Since(t0).Seconds()

	if _, err := tr.Train(ctx, 2, nil); err != nil { // warm-up: buffers, caches
		return res, err
	}
	t0 = time.Now()
	if _, err := tr.Train(ctx, o.Steps, nil); err != nil {
		return res, err
	}
	res.TrainStepsPerS = float64(o.Steps) / time.Since(t0).Seconds()
	res.SamplesPerS = res.TrainStepsPerS * float64(cfg.BatchSize)
	res.MsPerStep = 1000 / res.TrainStepsPerS
	res.MsPer300StepEpoch = 300 * res.MsPerStep
	res.SelfCheck = info.SelfCheck
	if g, ok := tr.(*gpu.Trainer); ok {
		res.GEMMTFLOPs = gpu.GEMMFlops(model.Layers(cfg.Model), cfg.BatchSize) / (res.MsPerStep * 1e-3) / 1e12
		res.Forward = g.ForwardPath()
		res.Launches = g.Launches()
		res.StepsPerGraph = g.StepsPerGraph()
		res.Tuning = info.Tuning
		if o.Profile {
			if res.Kernels, err = g.ProfileStep(20); err != nil {
				return res, err
			}
			if res.KernelsInSitu, err = g.ProfileStepInSitu(20); err != nil {
				return res, err
			}
		}
	}
	if info.Backend == "cpu" && cfg.Precision == config.PrecisionFP32 {
		tr.Close()
		if res.PyTorch, err = runPyTorch(ctx, o.Stderr, o.PyTorchMode, o.Python, o.TorchVersion, o.TorchErr, cfg.BatchSize, res.Threads, res.TrainStepsPerS); err != nil {
			return res, err
		}
	}
	return res, nil
}

// PrintStep writes res as lines of text.
func PrintStep(w io.Writer, res StepResult) {
	fmt.Fprintf(w, "%s, %s, %d parameters, batch %d: %.1f train steps/s (%.3f ms/step, %.1f ms per 300-step epoch, %.0f samples/s), %.0f env steps/s, %.0f collect steps/s\n",
		res.Backend, res.Precision, res.Parameters, res.BatchSize, res.TrainStepsPerS, res.MsPerStep, res.MsPer300StepEpoch, res.SamplesPerS, res.EnvStepsPerS, res.CollectStepsPerS)
	if res.BLAS != "" {
		fmt.Fprintf(w, "  blas %s\n", res.BLAS)
	}
	if p := res.PyTorch; p != nil {
		if p.Status != "ok" {
			fmt.Fprintf(w, "  pytorch: %s: %s\n", p.Status, p.Reason)
		}
		for _, v := range p.Variants {
			if v.Status != "ok" {
				fmt.Fprintf(w, "  pytorch %-8s %s: %s\n", v.Variant, v.Status, v.Error)
				continue
			}
			fmt.Fprintf(w, "  pytorch %-8s (torch %s, %d threads): %.1f steps/s (%.3f ms/step); dqnflow/pytorch = %.2fx\n",
				v.Variant, p.Torch, p.Threads, v.StepsPerS, v.MsPerStep, v.Speedup)
		}
	}
	for _, k := range res.Kernels {
		fmt.Fprintf(w, "  %2d %-13s %8.2f us  %s\n", k.Index, k.Name, k.Us, k.Grid)
	}
	for _, k := range res.KernelsInSitu {
		fmt.Fprintf(w, "  %2d %-13s %8.2f us in situ\n", k.Index, k.Name, k.Us)
	}
}

// envStepsPerS times the bare vectorised environment with random actions.
func envStepsPerS(ds *market.Dataset, cfg config.RunConfig) (float64, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	env, err := sim.NewVecEnv(ds, ds.Train, cfg.Env.NumEnvs, cfg.Env.EpisodeBars, rng)
	if err != nil {
		return 0, err
	}
	acts := make([]market.Action, env.N())
	var res sim.StepResult
	const steps = 2000
	t0 := time.Now()
	for s := 0; s < steps; s++ {
		for i := range acts {
			acts[i] = market.Action{Dir: rng.IntN(market.NumDirections), Size: rng.IntN(market.NumSizes), Exit: rng.IntN(market.NumExits)}
		}
		if err := env.Step(acts, &res); err != nil {
			return 0, err
		}
	}
	return float64(steps*env.N()) / time.Since(t0).Seconds(), nil
}
