// Package cli implements the dqnflow command line: one function per command,
// each parsing its own flags and calling the packages that do the work.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"go.temporal.io/sdk/client"
)

// command is one subcommand (or group) of the dqnflow binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// env carries the process's standard streams to the commands.
type env struct {
	stdout, stderr io.Writer
	conn           *temporalConn // the Temporal connection (temporal.go)
	// ckpt holds the checkpoint flags (checkpointflags.go) of the command.
	ckpt *checkpointFlags
	// metrics, if set, receives the Temporal SDK's metrics of the clients
	// this process dials (a worker's --metrics-addr).
	metrics client.MetricsHandler
}

// errUsage marks an error whose message already explains the correct usage.
var errUsage = errors.New("usage")

func commands() []command {
	return []command{
		{"train", "train locally: dqnflow train --device cpu [--config FILE] [--data FILE] [--epochs N] [--out DIR]", runTrain},
		{"backtest", "greedy backtest of a checkpoint: dqnflow backtest --checkpoint FILE --data FILE [--range test|validation|all] [--instrument NAME] [--json] (the test range by default)", runBacktest},
		{"predict", "features and Q values per bar: dqnflow predict --checkpoint FILE --data FILE --json", runPredict},
		{"checkpoint", "checkpoint export|verify|list|keygen", runCheckpoint},
		{"config", "config defaults: print the default config as JSON", runConfig},
		{"bench", "throughput: dqnflow bench --device cpu [--json]; Temporal overhead: dqnflow bench --temporal", runBench},
		{"learn-check", "train on the synthetic series with and without its signal and compare with the oracle on the test range", runLearnCheck},
		{"parity", "convergence parity: dqnflow parity --device cuda [--epochs 50] [--modes fp32,bf16-mixed,bf16,bf16-sr]: each mode against fp32, JSON and learning curves", runParity},
		{"walkforward", "walk-forward: dqnflow walkforward [--config FILE] [--data FILE] [--windows K] [--test-bars N]: one run per window, test metrics per window and pooled", runWalkForward},
		{"baselines", "simple rules on walkforward's windows: dqnflow baselines [--config FILE] [--data FILE] [--windows K] [--lookbacks 3,24,...]: momentum and reversal chosen on validation, test metrics per window and joined, no training", runBaselines},
		{"evaluate", "dqnflow evaluate [--config FILE | --checkpoint FILE] [--out DIR]: test-range report with plots for every bundled series and the synthetic one", runEvaluate},
		{"dev", "local stack: Temporal dev server + UI, migrations, a worker [--demo]", runDev},
		{"worker", "a worker: dqnflow worker --role all|control|gpu --device auto|cpu|cuda[:N] [--runs-per-device N] [--cpu-devices N]", runWorker},
		{"run", "runs on Temporal: run start|list|show|watch|compare|pause|resume|stop", runRun},
		{"report", "HTML report with plots of a run or a sweep: dqnflow report RUN --out DIR", runReport},
		{"schedule", "periodic retraining: schedule create|list|delete", runSchedule},
		{"sweep", "grid search: sweep start --grid PATH=V1,V2 ... [--max-concurrent N]", runSweep},
		{"migrate", "apply the PostgreSQL migrations (DATABASE_URL)", runMigrate},
		{"doctor", "check what is reachable and what is misconfigured: Temporal, the store, GPUs, libraries, checkpoint directory", runDoctor},
		{"completion", "shell completion: dqnflow completion bash|zsh|fish", runCompletion},
		{completeCommand, "", runComplete},
	}
}

// Main runs the dqnflow command line with args (without the program name)
// and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, conn: &temporalConn{}, ckpt: &checkpointFlags{}}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	if len(args) >= 2 && subcommands[args[0]] != nil && isHelp(args[1]) {
		groupHelp(stdout, args[0])
		return 0
	}
	if len(args) == 3 && flagless[args[0]+" "+args[1]] && isHelp(args[2]) {
		flaglessHelp(stdout, args[0]+" "+args[1])
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, e, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "dqnflow %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "dqnflow %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "dqnflow: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "dqnflow: distributional, action-branching DQN trading agent on Temporal")
	fmt.Fprintln(w, "\nCommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		if c.summary != "" {
			fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nGetting started:")
	for _, x := range []string{
		"dqnflow dev --demo                      # Temporal, UI, a worker and a demo run, nothing else needed",
		"dqnflow run start --config my.json      # in another terminal; prints the run id",
		"dqnflow run watch RUN                   # live progress",
		"dqnflow report RUN --out reports/RUN    # HTML report with plots",
		"dqnflow doctor                          # what is reachable, what is not",
	} {
		fmt.Fprintf(w, "  %s\n", x)
	}
	fmt.Fprintln(w, "\nRun \"dqnflow COMMAND -h\" for a command's flags and examples.")
}

// newFlags returns a FlagSet whose errors are returned, not printed and
// exited on, and whose usage goes to stderr.
func newFlags(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("dqnflow "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if dialsTemporal(name) {
		e.conn.register(fs)
	}
	if readsCheckpoints(name) {
		e.ckpt.register(fs)
	}
	setUsage(fs, name)
	return fs
}

// parse parses args and rejects positional arguments beyond maxArgs.
func parse(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > maxArgs {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, strings.Join(fs.Args()[maxArgs:], " "))
	}
	return nil
}

// required returns an error naming the first flag in names whose value is empty.
func required(fs *flag.FlagSet, names ...string) error {
	for _, n := range names {
		if f := fs.Lookup(n); f != nil && f.Value.String() == "" {
			return fmt.Errorf("%w: flag --%s is required", errUsage, n)
		}
	}
	return nil
}
