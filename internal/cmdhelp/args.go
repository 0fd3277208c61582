package cmdhelp

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dqnflow/dqnflow/internal/suggest"
	"github.com/dqnflow/dqnflow/internal/usage"
)

// NoArgs refuses positional arguments: a usage error naming the first.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: unexpected argument %q (%s)", usage.Err, strings.Join(args, " "), cmd.UseLine())
	}
	return nil
}

// ArgsBetween accepts from lo to hi positional arguments; outside, a
// usage error that shows the command's synopsis.
func ArgsBetween(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) > hi:
			return fmt.Errorf("%w: unexpected argument %q: want %q", usage.Err, strings.Join(args[hi:], " "), cmd.UseLine())
		case len(args) < lo:
			return fmt.Errorf("%w: want %q", usage.Err, cmd.UseLine())
		}
		return nil
	}
}

// SubcommandArgs is the Args of a command with subcommands: a word that
// reaches it is none of them, a usage error with the nearest one.
func SubcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	// The top level has too many commands to list in one line.
	what, want := fmt.Sprintf("unknown command %q", args[0]), `"dqnflow help" lists the commands`
	if cmd.HasParent() {
		what, want = fmt.Sprintf("unknown %s command %q", cmd.Name(), args[0]), "want "+SubcommandList(cmd)
	}
	if s := suggest.Nearest(args[0], subcommandNames(cmd)); s != "" {
		return fmt.Errorf("%w: %s: did you mean %q? (%s)", usage.Err, what, s, want)
	}
	return fmt.Errorf("%w: %s: %s", usage.Err, what, want)
}

// subcommandNames are the names of the subcommands of cmd a user can run,
// in the order help lists them.
func subcommandNames(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return names
}

// SubcommandList is "a, b or c": cmd's subcommands, as help lists them.
func SubcommandList(cmd *cobra.Command) string {
	names := subcommandNames(cmd)
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// shorthandErr is pflag's error for a single-dash word it cannot read as
// shorthand flags: "unknown shorthand flag: 'j' in -json".
var shorthandErr = regexp.MustCompile(`^unknown shorthand flag: '.' in -([^-=\s][^=\s]*)`)

// FlagError turns pflag's errors into usage errors: a long flag given
// with one dash (Go's flag syntax, which dqnflow took before ADR 0033)
// is named with its two-dash form, and an unknown flag gets the nearest
// flag of the command.
func FlagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if m := shorthandErr.FindStringSubmatch(msg); m != nil {
		if cmd.Flags().Lookup(m[1]) != nil {
			return fmt.Errorf("%w: flag -%s: a long flag takes two dashes: --%s", usage.Err, m[1], m[1])
		}
		if s := suggest.Nearest(m[1], names); s != "" {
			return fmt.Errorf("%w: %s: did you mean --%s?", usage.Err, msg, s)
		}
	}
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := suggest.Nearest(name, names); s != "" {
			return fmt.Errorf("%w: %s: did you mean --%s?", usage.Err, msg, s)
		}
	}
	return fmt.Errorf("%w: %s", usage.Err, msg)
}
