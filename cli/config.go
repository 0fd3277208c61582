package cli

import (
	"context"
	"fmt"

	"github.com/dqnflow/dqnflow/config"
)

// runConfig implements "dqnflow config defaults".
func runConfig(_ context.Context, e *env, args []string) error {
	if len(args) != 1 || args[0] != "defaults" {
		return fmt.Errorf("%w: want \"dqnflow config defaults\"", errUsage)
	}
	_, err := fmt.Fprintf(e.stdout, "%s\n", config.Defaults().JSON())
	return err
}
