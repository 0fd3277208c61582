package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// parsePositional parses args with flags before, between or after the
// positional arguments ("report RUN --out DIR" and "report --out DIR RUN"
// alike; the flag package alone stops at the first positional argument)
// and returns the positional ones, at most maxArgs of them.
func parsePositional(fs *flag.FlagSet, args []string, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) > maxArgs {
		return nil, fmt.Errorf("%w: unexpected argument %q", errUsage, strings.Join(pos[maxArgs:], " "))
	}
	return pos, nil
}
