package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/research/learncheck"
)

// learnCheckCmd is "dqnflow learn-check" (package learncheck): it exits 1
// when the agent does not learn the planted signal, or trades where
// there is none.
func learnCheckCmd(e *env) *cobra.Command {
	cmd := leaf("learn-check",
		"does it learn? train on a synthetic series with and without its signal, against the oracle",
		"learn-check trains on the synthetic series with and without its signal and compares both with the oracle on the test range: a model that learns beats flat where there is a signal and does not where there is none.",
		"dqnflow learn-check --json")
	fs := cmd.Flags()
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: the learn-check config)")
	noSignal := fs.Bool("no-signal", true, "also train on the series without a signal")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	blasName := fs.String("blas", "", "CPU matrix library: auto, gonum, openblas or accelerate (default: the config's, auto)")
	flagValues(fs, "blas", blasValues...)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg := learncheck.Config()
		if *cfgPath != "" {
			var err error
			if cfg, err = config.Load(*cfgPath); err != nil {
				return err
			}
		}
		if *blasName != "" {
			cfg.BLAS = *blasName
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%w (after applying flags)", err)
			}
		}
		if cfg.Data.Path != "synthetic" {
			return fmt.Errorf("%w: learn-check needs data.path \"synthetic\", got %q", errUsage, cfg.Data.Path)
		}
		if cfg.Data.TestFraction == 0 {
			return fmt.Errorf("%w: learn-check scores the held-out test range; data.test_fraction is 0", errUsage)
		}
		out, err := benchOutDir("learn-check")
		if err != nil {
			return err
		}
		train := func(ctx context.Context, cfg config.RunConfig, dir, runID string) (learncheck.Trained, error) {
			r, err := trainLocal(ctx, e, prices.Source{}, cfg, dir, runID)
			return learncheck.Trained{Info: r.Info, BestEpoch: r.BestEpoch, ValidT: r.ValidT, Abstained: r.Abstained,
				Final: r.Final(), Checkpoint: r.CheckpointTest}, err
		}
		res, err := learncheck.Check(cmd.Context(), cfg, *noSignal, out, train)
		if err := printResult(e, err, *jsonOut, res, learncheck.Print); err != nil {
			return err
		}
		return learncheck.Verdict(res)
	}
	return cmd
}
