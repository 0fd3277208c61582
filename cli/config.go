package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
)

// configCmd is "dqnflow config defaults".
func configCmd(e *env) *cobra.Command {
	defaults := leaf("defaults", "print the default config as JSON",
		"defaults prints every setting of a RunConfig with its default, as JSON: a file to edit and pass to --config.",
		"dqnflow config defaults > my.json   # then edit and: dqnflow run start --config my.json")
	defaults.RunE = func(*cobra.Command, []string) error {
		_, err := fmt.Fprintf(e.stdout, "%s\n", config.Defaults().JSON())
		return err
	}
	return group("config", "the run config: defaults", "config prints the default RunConfig.", defaults)
}
