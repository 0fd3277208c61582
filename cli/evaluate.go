package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/research/evaluation"
	"github.com/dqnflow/dqnflow/trainer"
)

// evaluateCmd is "dqnflow evaluate": for each series it trains the
// config (validation picks the checkpoint and stops early; with --seeds N
// at N seeds, each run reported beside the first, and the N checkpoints
// voting together) or takes --checkpoint, runs the policy once on the
// series' held-out test range, and writes report.md with the metrics beside buy-and-hold and flat,
// costs per trade and per round trip, and equity and drawdown PNGs.
func evaluateCmd(e *env) *cobra.Command {
	cmd := leaf("evaluate",
		"test-range report with plots for every bundled series and the synthetic one",
		"evaluate trains the config (or takes --checkpoint) on every bundled series and the synthetic one and writes a test-range report with plots.",
		"dqnflow evaluate --out reports/eval          # trains the defaults on every bundled series and the synthetic one",
		"dqnflow evaluate --data bundled:USA500IDXUSD_H1.csv --seeds 8   # eight runs: how much of one result is the seed",
		"dqnflow evaluate --checkpoint ck.safetensors --data bundled:bitcoin_2024.csv --out reports/ck")
	fs := cmd.Flags()
	cfgPath := fs.String("config", "", "RunConfig JSON file to train (default: built-in defaults)")
	ckPath := fs.String("checkpoint", "", "evaluate this checkpoint instead of training (its config gives the ranges)")
	series := fs.String("data", strings.Join(evaluation.SeriesNames(), ","), "comma-separated series: CSV files, bundled:NAME, synthetic")
	epochs := fs.Int("epochs", 0, "epochs per training run (default: the config's epochs)")
	device := fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	flagValues(fs, "device", deviceValues...)
	out := fs.String("out", "", "directory for the report, plots and runs (default: runs/<id>)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	seeds := fs.Int("seeds", 1, "train each series at this many seeds (the config's seed and the next ones) and report every run beside the first")
	allowChanged := fs.Bool("allow-changed-data", false, "with a panel run's --checkpoint: evaluate even when a series' file no longer has the SHA-256 (or the ranges) the checkpoint recorded, with a warning")
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		var paths []string
		for _, p := range strings.Split(*series, ",") {
			if p = strings.TrimSpace(p); p != "" {
				paths = append(paths, p)
			}
		}
		src, err := df.source(paths...)
		if err != nil {
			return err
		}
		if *seeds < 1 || *seeds > 1000 {
			return fmt.Errorf("%w: --seeds %d: want 1 to 1000", errUsage, *seeds)
		}
		var cfg config.RunConfig
		var ck *checkpoint.Checkpoint
		var rec *checkpoint.Recommendation
		var pn *market.Panel // a panel checkpoint's own panel
		var panelScore sim.PanelScore
		if *ckPath != "" {
			if *cfgPath != "" {
				return fmt.Errorf("%w: give --config (train) or --checkpoint (evaluate it), not both", errUsage)
			}
			if *seeds != 1 {
				return fmt.Errorf("%w: --seeds trains; a --checkpoint is one trained policy", errUsage)
			}
			if ck, _, err = readCheckpoint(ctx, e, *ckPath); err != nil {
				return err
			}
			if cfg, err = trainer.CheckpointConfig(ck); err != nil {
				return fmt.Errorf("checkpoint %s: %w", *ckPath, err)
			}
			if rec, err = evaluation.RunRecommendation(ck, *ckPath); err != nil {
				return err
			}
			// A panel run's checkpoint is evaluated on its own panel
			// unless --data names other series.
			if _, isPanel := ck.Meta[checkpoint.MetaPanel]; isPanel && !fs.Changed("data") {
				if pn, err = localrun.CheckpointPanel(ctx, e.stderr, src, ck, *ckPath, *allowChanged); err != nil {
					return err
				}
				if paths, err = evaluation.PanelEvaluation(pn, ck, &panelScore); err != nil {
					return fmt.Errorf("evaluate %s on its panel: %w", *ckPath, err)
				}
			}
		} else if cfg, err = loadConfig(fs, *cfgPath, *device, "", *epochs); err != nil {
			return err
		}
		id := newRunID("evaluate")
		if *out == "" {
			*out = filepath.Join("runs", id)
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fmt.Errorf("create output directory: %w", err)
		}
		ev, err := evaluation.Run(ctx, evaluation.Options{
			Evaluation: evaluation.Evaluation{Date: time.Now().UTC().Format(time.RFC3339), Checkpoint: *ckPath, Config: cfg, Recommendation: rec, Notice: evaluation.FlatNotice(rec)},
			Source:     src, Paths: paths, Out: *out, ID: id,
			Evaluated: ck, Panel: pn, PanelScore: panelScore, Seeds: *seeds,
			Train: func(ctx context.Context, cfg config.RunConfig, out, runID string) (localrun.Result, error) {
				return trainLocal(ctx, e, src, cfg, out, runID)
			},
			ReadOptions: e.ckpt.options, Stderr: e.stderr,
		})
		if err != nil {
			return err
		}
		if *jsonOut {
			return jsonfile.Print(e.stdout, ev)
		}
		evaluation.Print(e.stdout, ev)
		fmt.Fprintf(e.stdout, "report: %s\n", filepath.Join(*out, "report.md"))
		return nil
	}
	return cmd
}
