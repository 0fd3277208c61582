package cli

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/dqnflow/dqnflow/research/wfrun"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/spf13/cobra"
)

// walkForwardCmd is "dqnflow walkforward": the calendar walk-forward
// study of package walkforward over a set of series (ADR 0038). The
// research logic lives there; this command reads the flags, runs the
// study in this process (no Temporal), writes results.json and prints a
// per-series table.
func walkForwardCmd(e *env) *cobra.Command {
	cmd := leaf("walkforward",
		"calendar walk-forward over a set of series: the agent at several seeds and the baselines, per window and series",
		"walkforward lays calendar windows over the series (train on everything before a date, validate on the next block, test on the block after, rolled forward by --step), "+
			"trains the agent once per seed on each window's training ranges, backtests it and the baselines (flat, buy-and-hold, time-series momentum chosen on the training range, "+
			"the best simple rule chosen on validation) on every test block with the same costs and sizing, and writes every result to DIR/results.json. "+
			"A run whose validation t is below backtest.min_valid_t abstains and is flat (ADR 0016; --gate none trades it anyway). "+
			"Each window's timings per phase go to stderr.",
		"dqnflow walkforward --series '../shared/data/corpus/h4-forex/*.csv' --device cuda --out runs/wf",
		"dqnflow walkforward --series 'data/EURUSD_H4.csv,data/GBPUSD_H4.csv' --step 6mo --test 6mo --valid 3mo --seeds 8 --leave-out GBPUSD_H4",
		"dqnflow walkforward --config panel.json --leave-out 25% --prior-trials 12 --json")
	fs := cmd.Flags()
	sf := addStudyFlags(fs)
	out := fs.String("out", "", "directory for results.json (and --checkpoints) (default: runs/<id>)")
	keep := fs.Bool("checkpoints", false, "also write each run's chosen checkpoint under --out (window-N/SERIES/seed-S.safetensors)")
	jsonOut := fs.Bool("json", false, "print the whole result (results.json) instead of the table")
	maxTime := fs.Duration("max-time", 0, "end the study within this wall time (e.g. 7m): no window starts that would end after it (a window is expected to take as long as the one before); the windows done are written, results.json's stopped says so (0: no limit)")
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		st, typed, err := sf.study()
		if err != nil {
			return err
		}
		src, err := df.source(typed...)
		if err != nil {
			return err
		}
		if *maxTime < 0 {
			return fmt.Errorf("%w: --max-time %s: must not be negative", errUsage, *maxTime)
		}
		opt, err := e.ckpt.options()
		if err != nil {
			return err
		}
		be, dev, err := openBackend(e, st.Config.Device)
		if err != nil {
			return err
		}
		id := newRunID("walkforward")
		if *out == "" {
			*out = filepath.Join("runs", id)
		}
		st.Source, st.Train, st.Log = src, walkforward.LocalTrainer(be, opt, e.stderr), e.stderr
		if *keep {
			st.Dir = *out
		}
		if *maxTime > 0 {
			st.Deadline = time.Now().Add(*maxTime)
		}
		return wfrun.Local(ctx, st, wfrun.LocalOptions{Out: *out, Device: dev, Stdout: e.stdout, Stderr: e.stderr, JSON: *jsonOut})
	}
	cmd.AddCommand(walkForwardSummarizeCmd(e), walkForwardRecordCmd(e), walkForwardStartCmd(e))
	return cmd
}
