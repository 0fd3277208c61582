package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/internal/cmdhelp"
)

// The help, argument checks and flag values of every command
// (internal/cmdhelp).
var (
	groupFlags         = cmdhelp.GroupFlags
	printHelp          = cmdhelp.PrintHelp
	printUsage         = cmdhelp.PrintUsage
	noArgs             = cmdhelp.NoArgs
	argsBetween        = cmdhelp.ArgsBetween
	subcommandArgs     = cmdhelp.SubcommandArgs
	subcommandList     = cmdhelp.SubcommandList
	flagError          = cmdhelp.FlagError
	flagValues         = cmdhelp.FlagValues
	completeFlagValues = cmdhelp.CompleteFlagValues
)

// helpCmd is "dqnflow help [COMMAND]...": the help of the command named,
// the top level's without one; a name that is no command is a usage
// error with the nearest one.
func helpCmd() *cobra.Command {
	c := leaf("help [COMMAND]...", "help about any command", "Help prints a command's description, flags and examples, as \"dqnflow COMMAND --help\" does.",
		"dqnflow help run start",
		"dqnflow help schedule")
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		target, rest, err := c.Root().Find(args)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if len(rest) > 0 {
			if !target.HasSubCommands() {
				return fmt.Errorf("%w: %s has no command %q", errUsage, target.CommandPath(), rest[0])
			}
			return subcommandArgs(target, rest)
		}
		target.InitDefaultHelpFlag() // so that its flags list --help
		return target.Help()
	}
	c.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		target, _, err := c.Root().Find(args)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, sub := range target.Commands() {
			if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
				out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	return c
}
