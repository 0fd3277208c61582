package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// benchResult is what "dqnflow bench --json" prints.
type benchResult struct {
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
	PyTorch *pytorchBench `json:"pytorch,omitempty"`
}

// benchCmd is "dqnflow bench".
func benchCmd(e *env) *cobra.Command {
	cmd := leaf("bench",
		"throughput of the training step, the environment and the collector; or Temporal's overhead",
		"bench times the training step (gradient steps per second), the bare environment and the collector on a device; on the CPU in fp32 also the PyTorch reference of the same step. With --epoch it times the default epoch on a CUDA device, with --temporal the overhead Temporal adds per epoch on a running server.",
		"dqnflow bench --device cpu --json",
		"dqnflow bench --device cuda --precision bf16-mixed --batch 4096 --profile --json",
		"dqnflow bench --temporal --epochs 50   # needs dqnflow dev running")
	fs := cmd.Flags()
	e.conn.register(fs)
	device := fs.String("device", "cpu", "cpu, cuda, cuda:N or auto")
	flagValues(fs, "device", deviceValues...)
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	steps := fs.Int("steps", 30, "gradient steps to time")
	precision := fs.String("precision", "", "precision mode (default: the config's)")
	flagValues(fs, "precision", precisionValues...)
	batch := fs.Int("batch", 0, "batch size (default: the config's)")
	blasFlag(fs)
	pytorchMode := fs.String("pytorch", "auto", "cpu, fp32: time the PyTorch reference of the step beside ours at the same batch and threads: auto (when python has torch), on, off")
	flagValues(fs, "pytorch", "auto", "on", "off")
	python := fs.String("python", "python3", "cpu: the Python interpreter for --pytorch")
	profile := fs.Bool("profile", false, "CUDA: time every kernel of a step with CUDA events")
	jsonOut := fs.Bool("json", false, "print JSON")
	temporal := fs.Bool("temporal", false, "measure Temporal's overhead per epoch instead, on the server at $"+envTemporalAddress+" (needs a running worker, e.g. dqnflow dev)")
	epochs := fs.Int("epochs", 30, "with --temporal: epochs of the near-empty benchmark run; with --epoch: epochs to time")
	epoch := fs.Bool("epoch", false, "CUDA: time the default epoch end to end on the device (collect, train, sync, backtest of the validation range), each phase and the GPU's busy fraction, and the collector with 4096 and 16384 environments")
	df := addDataFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		src, err := df.source()
		if err != nil {
			return err
		}
		if *temporal {
			return benchTemporal(ctx, e, *epochs, *jsonOut)
		}
		if m := *pytorchMode; m != "auto" && m != "on" && m != "off" {
			return fmt.Errorf("%w: flag --pytorch %q: want auto, on or off", errUsage, m)
		}
		if *steps < 1 {
			return fmt.Errorf("%w: flag --steps %d: must be at least 1", errUsage, *steps)
		}
		if *epoch && *epochs < 1 {
			return fmt.Errorf("%w: flag --epochs %d: must be at least 1", errUsage, *epochs)
		}
		// --epochs counts the epochs to time; the config takes the same number
		// (it must be one the config accepts, and a bench never trains past it).
		cfg, err := loadConfig(fs, *cfgPath, *device, "", *epochs)
		if err != nil {
			return err
		}
		cfg.Env.EpsilonStart = cfg.Env.EpsilonEnd
		if *precision != "" {
			cfg.Precision = *precision
		}
		if *batch > 0 {
			cfg.BatchSize = *batch
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		if *epoch {
			return benchEpoch(ctx, e, src, cfg, *epochs, *jsonOut)
		}
		// Asked for PyTorch and it cannot run: say so before timing anything.
		var torchVersion string
		var torchErr error
		if *pytorchMode != "off" && cfg.Precision == config.PrecisionFP32 && cfg.Device != "cuda" && !strings.HasPrefix(cfg.Device, "cuda:") {
			if torchVersion, torchErr = probeTorch(ctx, *python); torchErr != nil && *pytorchMode == "on" {
				return fmt.Errorf("--pytorch on: %w", torchErr)
			}
		}
		b, dev, err := openBackend(e, cfg.Device)
		if err != nil {
			return err
		}
		ds, err := market.Prepare(ctx, src, cfg)
		if err != nil {
			return err
		}
		res := benchResult{
			Date: time.Now().UTC().Format(time.RFC3339), Device: dev, Threads: runtime.GOMAXPROCS(0),
			BatchSize: cfg.BatchSize, NumEnvs: cfg.Env.NumEnvs,
		}
		if res.EnvStepsPerS, err = benchEnv(ds, cfg); err != nil {
			return err
		}
		tr, err := b.New(ctx, cfg, ds, nil)
		if err != nil {
			return err
		}
		defer tr.Close()
		info := tr.Info()
		res.Backend, res.Precision, res.Parameters, res.BLAS = info.Backend, info.Precision, info.Parameters, info.BLAS
		if info.Threads > 0 {
			res.Threads = info.Threads
		}
		if info.BLAS != "" {
			fmt.Fprintf(e.stderr, "blas: %s\n", info.BLAS)
		}

		collect := max(cfg.Replay.Warmup/cfg.Env.NumEnvs, 1)
		t0 := time.Now()
		if _, err := tr.Collect(ctx, collect); err != nil {
			return err
		}
		res.CollectStepsPerS = float64(collect*cfg.Env.NumEnvs) / time.Since(t0).Seconds()

		if _, err := tr.Train(ctx, 2, nil); err != nil { // warm-up: buffers, caches
			return err
		}
		t0 = time.Now()
		if _, err := tr.Train(ctx, *steps, nil); err != nil {
			return err
		}
		res.TrainStepsPerS = float64(*steps) / time.Since(t0).Seconds()
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
			if *profile {
				if res.Kernels, err = g.ProfileStep(20); err != nil {
					return err
				}
				if res.KernelsInSitu, err = g.ProfileStepInSitu(20); err != nil {
					return err
				}
			}
		}
		if info.Backend == "cpu" && cfg.Precision == config.PrecisionFP32 {
			tr.Close()
			if res.PyTorch, err = runPyTorchBench(ctx, e.stderr, *pytorchMode, *python, torchVersion, torchErr, cfg.BatchSize, res.Threads, res.TrainStepsPerS); err != nil {
				return err
			}
		}
		if *jsonOut {
			return printJSON(e, res)
		}
		fmt.Fprintf(e.stdout, "%s, %s, %d parameters, batch %d: %.1f train steps/s (%.3f ms/step, %.1f ms per 300-step epoch, %.0f samples/s), %.0f env steps/s, %.0f collect steps/s\n",
			res.Backend, res.Precision, res.Parameters, res.BatchSize, res.TrainStepsPerS, res.MsPerStep, res.MsPer300StepEpoch, res.SamplesPerS, res.EnvStepsPerS, res.CollectStepsPerS)
		if res.BLAS != "" {
			fmt.Fprintf(e.stdout, "  blas %s\n", res.BLAS)
		}
		if p := res.PyTorch; p != nil {
			if p.Status != "ok" {
				fmt.Fprintf(e.stdout, "  pytorch: %s: %s\n", p.Status, p.Reason)
			}
			for _, v := range p.Variants {
				if v.Status != "ok" {
					fmt.Fprintf(e.stdout, "  pytorch %-8s %s: %s\n", v.Variant, v.Status, v.Error)
					continue
				}
				fmt.Fprintf(e.stdout, "  pytorch %-8s (torch %s, %d threads): %.1f steps/s (%.3f ms/step); dqnflow/pytorch = %.2fx\n",
					v.Variant, p.Torch, p.Threads, v.StepsPerS, v.MsPerStep, v.Speedup)
			}
		}
		for _, k := range res.Kernels {
			fmt.Fprintf(e.stdout, "  %2d %-13s %8.2f us  %s\n", k.Index, k.Name, k.Us, k.Grid)
		}
		for _, k := range res.KernelsInSitu {
			fmt.Fprintf(e.stdout, "  %2d %-13s %8.2f us in situ\n", k.Index, k.Name, k.Us)
		}
		return nil
	}
	return cmd
}

// benchEnv times the bare vectorised environment with random actions.
func benchEnv(ds *market.Dataset, cfg config.RunConfig) (float64, error) {
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

// benchOutDir is where bench and learn-check keep their files.
func benchOutDir(name string) (string, error) {
	dir := filepath.Join("runs", name)
	return dir, os.MkdirAll(dir, 0o755)
}
