// Package usage holds the error that marks a mistake in how a command
// was called: a flag's value, a missing argument. The command line exits
// 2 on it (cli.Main); the packages that do a command's work wrap it when
// the input that is wrong came from a flag, so the message names the
// flag and the exit code stays a usage error's.
package usage

import "errors"

// Err marks an error whose message already explains the correct usage.
var Err = errors.New("usage")
