// Package cmdhelp is the command line's help and argument handling for
// cobra commands: the help text (a description wrapped, the synopsis, the
// subcommands by group, the examples, the flags under their headings), the
// usage errors for positional arguments and for flags (the nearest name
// suggested, a long flag given one dash named), and the values completion
// offers for a flag. It knows no command: cli builds them and hooks these
// in (newRoot).
package cmdhelp

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

// GroupFlags puts the named flags of fs under the heading title in help.
func GroupFlags(fs *pflag.FlagSet, title string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, flagGroupKey, []string{title}); err != nil {
			panic(fmt.Sprintf("groupFlags %q: %v", title, err)) // a flag name misspelt in the code
		}
	}
}

// helpWidth is where help wraps the flags' descriptions.
const helpWidth = 100

// PrintHelp is every command's help: its description, then its usage.
func PrintHelp(c *cobra.Command, _ []string) {
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

// PrintUsage writes c's usage (what help shows after the description).
func PrintUsage(c *cobra.Command) error {
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
