package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagGroupKey is the pflag annotation that puts a flag under its own
// heading in help ("Temporal connection flags:"), for commands with many
// flags; a flag without it is listed under "Flags:".
const flagGroupKey = "dqnflow_flag_group"

// groupFlags puts the named flags of fs under the heading title in help.
func groupFlags(fs *pflag.FlagSet, title string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, flagGroupKey, []string{title}); err != nil {
			panic(fmt.Sprintf("groupFlags %q: %v", title, err)) // a flag name misspelt in the code
		}
	}
}

// helpWidth is where help wraps the flags' descriptions.
const helpWidth = 100

// printHelp is every command's help: its description, then its usage.
func printHelp(c *cobra.Command, _ []string) {
	w := c.OutOrStdout()
	fmt.Fprintf(w, "%s\n\n", wrap(strings.TrimSpace(c.Long), descriptionWidth))
	writeUsage(w, c)
}

// descriptionWidth is where help wraps a command's description.
const descriptionWidth = 80

// wrap breaks s into lines of at most width characters at spaces (a word
// longer than width stands on a line of its own); line breaks in s stay.
func wrap(s string, width int) string {
	var b strings.Builder
	for i, para := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		n := 0
		for j, word := range strings.Fields(para) {
			l := len([]rune(word))
			if j > 0 && n+1+l > width {
				b.WriteByte('\n')
				n = 0
			} else if j > 0 {
				b.WriteByte(' ')
				n++
			}
			b.WriteString(word)
			n += l
		}
	}
	return b.String()
}

// printUsage writes c's usage (what help shows after the description).
func printUsage(c *cobra.Command) error {
	writeUsage(c.OutOrStderr(), c)
	return nil
}

// writeUsage writes the synopsis, the subcommands (by group at the top
// level), the examples, and the flags under their headings: the
// command's own, its flag groups in the order it defines them, then the
// flags every command takes.
func writeUsage(w io.Writer, c *cobra.Command) {
	fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
	if c.HasAvailableSubCommands() {
		writeSubcommands(w, c)
	}
	if c.HasExample() {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	for _, s := range flagSections(c) {
		fmt.Fprintf(w, "\n%s:\n%s", s.title, s.flags.FlagUsagesWrapped(helpWidth))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nRun \"%s COMMAND --help\" for a command's flags and examples.\n", c.CommandPath())
	}
}

// writeSubcommands lists c's subcommands, under the group titles where
// c has groups.
func writeSubcommands(w io.Writer, c *cobra.Command) {
	list := func(groupID string) {
		for _, sub := range c.Commands() {
			if (sub.IsAvailableCommand() || sub.Name() == "help") && sub.GroupID == groupID {
				fmt.Fprintf(w, "  %-*s %s\n", c.NamePadding()+2, sub.Name(), sub.Short)
			}
		}
	}
	if len(c.Groups()) == 0 {
		fmt.Fprintln(w, "\nCommands:")
		list("")
		return
	}
	for _, g := range c.Groups() {
		fmt.Fprintf(w, "\n%s\n", g.Title)
		list(g.ID)
	}
}

// flagSection is one heading of flags in help.
type flagSection struct {
	title string
	flags *pflag.FlagSet
}

// flagSections sorts c's visible flags under their headings.
func flagSections(c *cobra.Command) []flagSection {
	// Flags every command takes: inherited from the top level, or the top
	// level's own persistent ones.
	inherited, persistent := c.InheritedFlags(), c.PersistentFlags()
	var out []flagSection
	find := func(title string) *pflag.FlagSet {
		for _, s := range out {
			if s.title == title {
				return s.flags
			}
		}
		fs := pflag.NewFlagSet(title, pflag.ContinueOnError)
		fs.SortFlags = false
		out = append(out, flagSection{title, fs})
		return fs
	}
	find("Flags")
	var global []*pflag.Flag
	c.Flags().VisitAll(func(f *pflag.Flag) {
		switch {
		case f.Hidden:
		case f.Name == "help" || inherited.Lookup(f.Name) != nil || !c.HasParent() && persistent.Lookup(f.Name) != nil:
			global = append(global, f)
		case len(f.Annotations[flagGroupKey]) > 0:
			find(f.Annotations[flagGroupKey][0] + " flags").AddFlag(f)
		default:
			find("Flags").AddFlag(f)
		}
	})
	for _, f := range global {
		find("Global flags").AddFlag(f)
	}
	kept := out[:0]
	for _, s := range out {
		if s.flags.HasFlags() {
			kept = append(kept, s)
		}
	}
	return kept
}

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
