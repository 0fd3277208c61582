package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/research/bench"
	"github.com/dqnflow/dqnflow/temporalconn"
)

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
	temporal := fs.Bool("temporal", false, "measure Temporal's overhead per epoch instead, on the server at $"+temporalconn.EnvAddress+" (needs a running worker, e.g. dqnflow dev)")
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
		// Asked for PyTorch and it cannot run: say so before timing anything.
		var torchVersion string
		var torchErr error
		if !*epoch && *pytorchMode != "off" && cfg.Precision == config.PrecisionFP32 && cfg.Device != "cuda" && !strings.HasPrefix(cfg.Device, "cuda:") {
			if torchVersion, torchErr = bench.ProbeTorch(ctx, *python); torchErr != nil && *pytorchMode == "on" {
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
		if *epoch {
			res, err := bench.Epoch(ctx, b, dev, cfg, ds, *epochs)
			return printResult(e, err, *jsonOut, res, bench.PrintEpoch)
		}
		res, err := bench.Step(ctx, bench.StepOptions{Backend: b, Device: dev, Config: cfg, Dataset: ds, Steps: *steps, Profile: *profile,
			PyTorchMode: *pytorchMode, Python: *python, TorchVersion: torchVersion, TorchErr: torchErr, Stderr: e.stderr})
		return printResult(e, err, *jsonOut, res, bench.PrintStep)
	}
	return cmd
}

// benchTemporal is "dqnflow bench --temporal": Temporal's overhead per
// epoch on the server the connection flags name.
func benchTemporal(ctx context.Context, e *env, epochs int, jsonOut bool) error {
	if epochs < 4 {
		return fmt.Errorf("%w: flag --epochs %d: the Temporal benchmark needs at least 4", errUsage, epochs)
	}
	c, err := dial(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := bench.Temporal(ctx, c, e.conn.address(), newRunID("bench-temporal"), epochs, startWorkflow)
	return printResult(e, err, jsonOut, res, bench.PrintTemporal)
}

// printResult prints res, the result of a command's work, as JSON with
// jsonOut, else as text; err, the work's, is returned first.
func printResult[R any](e *env, err error, jsonOut bool, res R, text func(io.Writer, R)) error {
	if err != nil {
		return err
	}
	if jsonOut {
		return jsonfile.Print(e.stdout, res)
	}
	text(e.stdout, res)
	return nil
}

// benchOutDir is where bench and learn-check keep their files.
func benchOutDir(name string) (string, error) {
	dir := filepath.Join("runs", name)
	return dir, os.MkdirAll(dir, 0o755)
}
