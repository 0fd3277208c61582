package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/research/parity"
)

// parityCmd is "dqnflow parity": the convergence-parity study of
// issue 8 §5 (package parity). It writes parity.json and
// learning-curves.png under --out and exits 1 when a mode does not hold
// parity.
func parityCmd(e *env) *cobra.Command {
	cmd := leaf("parity",
		"convergence parity of the precision modes against fp32",
		"parity trains the same run in each precision mode, backtests the validation range after every epoch, and compares each mode with fp32 (final validation Sharpe, mean Q, gradient norms, no NaN); it writes parity.json and learning curves and exits 1 when a mode does not hold parity.",
		"dqnflow parity --device cuda --out runs/parity          # 50 epochs in fp32, bf16-mixed, bf16 and bf16 with stochastic rounding",
		"dqnflow parity --device cpu --config small.json --epochs 3 --modes fp32,bf16 --json")
	fs := cmd.Flags()
	device := fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	flagValues(fs, "device", deviceValues...)
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	epochs := fs.Int("epochs", 50, "epochs per mode")
	modes := fs.String("modes", "fp32,bf16-mixed,bf16,bf16-sr", "modes to train, fp32 first: fp32, bf16-mixed, bf16, bf16-sr (bf16 with optim.stochastic_rounding)")
	out := fs.String("out", filepath.Join("runs", "parity"), "directory for parity.json and learning-curves.png")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	blasFlag(fs)
	df := addDataFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		src, err := df.source(*dataPath)
		if err != nil {
			return err
		}
		ms, err := parity.ParseModes(*modes)
		if err != nil {
			return err
		}
		cfg, err := loadConfig(fs, *cfgPath, *device, *dataPath, *epochs)
		if err != nil {
			return err
		}
		cfg.Epochs = *epochs
		cfg.Precision, cfg.Optim.StochasticRounding = config.PrecisionFP32, false
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("%w (after applying flags)", err)
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fmt.Errorf("create output directory: %w", err)
		}
		start := time.Now()
		b, dev, err := openBackend(e, cfg.Device)
		if err != nil {
			return err
		}
		ds, err := market.Prepare(ctx, src, cfg)
		if err != nil {
			return err
		}
		res, err := parity.Study(ctx, parity.Options{Backend: b, Device: dev, Config: cfg, Dataset: ds, Modes: ms, Out: *out,
			Command: strings.Join(append([]string{"dqnflow"}, e.args...), " "), Stderr: e.stderr}, start)
		text := func(w io.Writer, res parity.Result) {
			parity.Print(w, res)
			fmt.Fprintf(w, "wrote %s and %s\n", filepath.Join(*out, "parity.json"), filepath.Join(*out, res.Plot))
		}
		if err := printResult(e, err, *jsonOut, res, text); err != nil {
			return err
		}
		return parity.Verdict(res)
	}
	return cmd
}

// precisionWarning is parity.Warning: what the commands that train print
// when the config selects a precision that does not hold parity.
func precisionWarning(cfg config.RunConfig) string { return parity.Warning(cfg) }
