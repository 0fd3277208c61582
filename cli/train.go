package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
)

// trainCmd is "dqnflow train": the whole training loop in this process,
// without Temporal (the TrainingRun workflow runs the same steps as
// activities).
func trainCmd(e *env) *cobra.Command {
	cmd := leaf("train", "train a run in this process, without Temporal",
		"train trains a run in this process, without Temporal: it backtests on the validation range every backtest.every epochs, "+
			"keeps the best checkpoint, and reports it on the held-out test range. Progress goes to stderr, the report to stdout.",
		"dqnflow train --device cpu --epochs 5 --out runs/local",
		"dqnflow train --device cuda --config my.json --data prices.csv --out runs/gpu",
		"dqnflow train --device cpu --series 'corpus/EURUSD_H4.csv,corpus/USDJPY_H4.csv' --out runs/panel   # one agent on a panel (data.series)")
	fs := cmd.Flags()
	device := fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	series := fs.String("series", "", "train one agent on a panel: data.series entries (files or globs, comma-separated, each optionally =INSTRUMENT) in place of data.path")
	epochs := fs.Int("epochs", 0, "number of epochs (default: the config's epochs)")
	blasFlag(fs)
	out := fs.String("out", "", "directory for checkpoints and the final report (default: runs/<run id>, a new one per run)")
	jsonOut := fs.Bool("json", false, "print the final report (best checkpoint on validation and test) as JSON")
	flagValues(fs, "device", deviceValues...)
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *dataPath != "" && *series != "" {
			return fmt.Errorf("%w: --data and --series: give one", errUsage)
		}
		typed := []string{*dataPath}
		if *series != "" {
			specs, err := prices.ParseSeries(*series)
			if err != nil {
				return fmt.Errorf("%w: --series: %v", errUsage, err)
			}
			for _, sp := range specs {
				typed = append(typed, sp.Path)
			}
		}
		src, err := df.source(typed...)
		if err != nil {
			return err
		}
		cfg, err := loadConfig(fs, *cfgPath, *device, *dataPath, *epochs)
		if err != nil {
			return err
		}
		switch {
		case *series != "":
			cfg.Data.Path, cfg.Data.Series = "", *series
		case *dataPath != "":
			cfg.Data.Series = "" // --data names one series
		}
		res, err := trainLocal(cmd.Context(), e, src, cfg, *out, "")
		if err != nil {
			return err
		}
		if *jsonOut {
			return jsonfile.Print(e.stdout, res)
		}
		localrun.PrintResult(e.stdout, res)
		return nil
	}
	return cmd
}

// blasFlag adds --blas, which loadConfig applies to the config's blas.
func blasFlag(fs *pflag.FlagSet) {
	fs.String("blas", "", "CPU matrix library: auto, gonum, openblas or accelerate (default: the config's blas, auto)")
	flagValues(fs, "blas", blasValues...)
}

// blasValues are what --blas takes; precisionValues what --precision takes.
var (
	blasValues      = []string{"auto", "gonum", "openblas", "accelerate"}
	precisionValues = []string{config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16}
)

// loadConfig reads the config file and applies the flags that override it;
// the result is validated, so a bad flag is named like a bad config key.
func loadConfig(fs *pflag.FlagSet, path, device, dataPath string, epochs int) (config.RunConfig, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	if set["device"] {
		cfg.Device = device
	}
	if set["data"] {
		cfg.Data.Path = dataPath
	}
	if set["epochs"] {
		cfg.Epochs = epochs
	}
	if set["blas"] {
		cfg.BLAS = fs.Lookup("blas").Value.String()
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%w (after applying flags)", err)
	}
	return cfg, nil
}

// trainLocal trains cfg in this process as run runID (a new id when
// empty) with the command's checkpoint flags, writing checkpoints and
// report.json under out (localrun.Run); src reads the data, progress
// goes to e.stderr.
func trainLocal(ctx context.Context, e *env, src prices.Source, cfg config.RunConfig, out, runID string) (localrun.Result, error) {
	if runID == "" {
		runID = newRunID("local")
	}
	return localrun.Run(ctx, localrun.Options{
		Source: src, Config: cfg, Out: out, RunID: runID, Stderr: e.stderr,
		Backend: func(device string) (trainer.Backend, error) {
			b, _, err := openBackend(e, device)
			return b, err
		},
		Checkpoint: e.ckpt.options,
	})
}

// openBackend opens the backend of device, a CUDA one in the tuning of the
// environment (gpu.TuningFromEnv: DQNFLOW_STEPS_PER_GRAPH and the rest),
// and says which on one short line of e.stderr, which it returns; why
// "auto" fell back to the CPU, at length, only with --verbose ("dqnflow
// doctor" says it too).
func openBackend(e *env, device string) (trainer.Backend, string, error) {
	tu, err := gpu.TuningFromEnv()
	if err != nil {
		return nil, "", err
	}
	b, c, err := backend.Open(device, tu)
	if err != nil {
		return nil, "", err
	}
	fmt.Fprintf(e.stderr, "device: %s\n", c.Summary)
	if c.Detail != "" && e.verbose {
		fmt.Fprintf(e.stderr, "device: %s\n", c.Detail)
	}
	return b, c.Summary, nil
}
