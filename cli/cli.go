// Package cli implements the dqnflow command line on cobra: one
// constructor per command (named for it, in the file of the same name),
// which defines the command's flags in one block and runs it by calling
// the packages that do the work. ADR 0033 records how the flags map.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/internal/usage"
)

// env carries to the commands the process's standard streams, its
// command line and the settings several commands share.
type env struct {
	stdout, stderr io.Writer
	conn           *temporalConn // the Temporal connection (temporal.go)
	// ckpt holds the checkpoint flags (checkpointflags.go) of the command.
	ckpt *checkpointFlags
	// metrics, if set, receives the Temporal SDK's metrics of the clients
	// this process dials (a worker's --metrics-addr).
	metrics client.MetricsHandler
	// verbose is --verbose: the details a command leaves out by default
	// (why a device was chosen, which metadata store a command read).
	verbose bool
	// args is the command line after the program name, as Main got it:
	// cobra hands a command only its positional arguments, and parity.json
	// records the whole line.
	args []string
}

// errUsage marks an error whose message already explains the correct
// usage; Main exits 2 on it.
var errUsage = usage.Err

// Command groups of the top-level help.
const (
	groupLocal    = "local"
	groupTemporal = "temporal"
	groupMeasure  = "measure"
	groupSetup    = "setup"
)

// newRoot returns the dqnflow command tree, its commands writing to e.
func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "dqnflow COMMAND",
		Short: "distributional, action-branching DQN trading agent on Temporal",
		Long:  "dqnflow: distributional, action-branching DQN trading agent on Temporal",
		Example: examples(
			"dqnflow dev --demo                      # Temporal, UI, a worker and a demo run, nothing else needed",
			"dqnflow run start --config my.json      # in another terminal; prints the run id",
			"dqnflow run watch RUN                   # live progress",
			"dqnflow report RUN --out reports/RUN    # HTML report with plots",
			"dqnflow doctor                          # what is reachable, what is not",
		),
		SilenceErrors: true, // Main prints them, with the command's path
		SilenceUsage:  true,
		// A bare "dqnflow" prints the help; a word that is no command is
		// a usage error with the nearest command (subcommandArgs).
		Args: subcommandArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
		// cobra's own completion command is replaced by completionCmd,
		// whose subcommands have examples like every other command.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.PersistentFlags().BoolVarP(&e.verbose, "verbose", "v", false, "say more: why a device was chosen, which metadata store a command reads")
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(printHelp)
	root.SetUsageFunc(printUsage)
	root.SetHelpCommand(helpCmd())
	root.AddGroup(
		&cobra.Group{ID: groupLocal, Title: "Train and evaluate on this machine:"},
		&cobra.Group{ID: groupTemporal, Title: "Run on Temporal:"},
		&cobra.Group{ID: groupMeasure, Title: "Measure:"},
		&cobra.Group{ID: groupSetup, Title: "Set up and inspect:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add(groupLocal, trainCmd(e), backtestCmd(e), predictCmd(e), evaluateCmd(e), walkForwardCmd(e), baselinesCmd(e))
	add(groupTemporal, devCmd(e), workerCmd(e), runCmd(e), reportCmd(e), scheduleCmd(e), sweepCmd(e))
	add(groupMeasure, benchCmd(e), learnCheckCmd(e), parityCmd(e))
	add(groupSetup, checkpointCmd(e), configCmd(e), dataCmd(e), migrateCmd(e), doctorCmd(e), completionCmd(root))
	root.SetHelpCommandGroupID(groupSetup)
	walk(root, func(c *cobra.Command) {
		// Help lists flags in the order each command defines them, the
		// likeliest first, not alphabetically.
		c.Flags().SortFlags = false
		c.LocalFlags().SortFlags = false
		completeFlagValues(c)
	})
	return root
}

// walk calls f on c and every command below it.
func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// newEnv is the env of one command line, writing to stdout and stderr.
func newEnv(stdout, stderr io.Writer) *env {
	return &env{stdout: stdout, stderr: stderr, conn: &temporalConn{}, ckpt: &checkpointFlags{}}
}

// Main runs the dqnflow command line with args (without the program name)
// and returns the process exit code: 0, 2 for a usage error (a mistyped
// command or flag, a missing argument), 1 for any other failure.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := newEnv(stdout, stderr)
	e.args = args
	root := newRoot(e)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	path := "dqnflow"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	fmt.Fprintf(stderr, "%s: %s\n", path, errtext.Clean(err.Error()))
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// leaf returns a command that takes no subcommands: use is its name and
// positional arguments ("watch RUN"), short its line in its group's list,
// long what its help says first (short when empty), and examples the
// command lines its help shows, which a user can paste.
func leaf(use, short, long string, example ...string) *cobra.Command {
	if long == "" {
		long = short
	}
	return &cobra.Command{Use: use, Short: short, Long: long, Example: examples(example...), Args: noArgs}
}

// group returns a command whose subcommands do the work; without one, or
// with a word that is none of them, it is a usage error that lists them.
func group(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	if long == "" {
		long = short
	}
	c := &cobra.Command{Use: use + " COMMAND", Short: short, Long: long, Args: subcommandArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fmt.Errorf("%w: want a command: %s (\"dqnflow help %s\" shows them)", errUsage, subcommandList(cmd), cmd.Name())
		}}
	var ex []string
	for _, s := range subs {
		c.AddCommand(s)
		for _, x := range strings.Split(s.Example, "\n") {
			if x = strings.TrimSpace(x); x != "" {
				ex = append(ex, x)
			}
		}
	}
	c.Example = examples(ex...)
	return c
}

// examples formats command lines for a command's Example, as its help
// prints them.
func examples(lines ...string) string {
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// required returns an error naming the first flag in names whose value is empty.
func required(fs *pflag.FlagSet, names ...string) error {
	for _, n := range names {
		if f := fs.Lookup(n); f != nil && f.Value.String() == "" {
			return fmt.Errorf("%w: flag --%s is required", errUsage, n)
		}
	}
	return nil
}
