//go:build tools

// Package govulncheck pins govulncheck, which `make vulncheck` (and CI) runs
// over dqnflow, in a module of its own: its dependencies never enter
// dqnflow's go.mod nor the Temporal CLI's (tools/go.mod), whose change
// would rebuild the dev server.
package govulncheck

import _ "golang.org/x/vuln/cmd/govulncheck"
