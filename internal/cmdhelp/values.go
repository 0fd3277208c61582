package cmdhelp

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// valuesKey is the pflag annotation that lists the values a flag takes,
// which completion offers.
const valuesKey = "dqnflow_values"

// FlagValues makes completion offer values for the flag name of fs.
func FlagValues(fs *pflag.FlagSet, name string, values ...string) {
	if err := fs.SetAnnotation(name, valuesKey, values); err != nil {
		panic(fmt.Sprintf("flagValues --%s: %v", name, err)) // a flag name misspelt in the code
	}
}

// CompleteFlagValues registers the completion of every flag of c that
// FlagValues annotated (cli's newRoot calls it on every command).
func CompleteFlagValues(c *cobra.Command) {
	c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if v := f.Annotations[valuesKey]; v != nil {
			c.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(v, cobra.ShellCompDirectiveNoFileComp))
		}
	})
}
