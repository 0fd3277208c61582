//go:build tools

// Package tools pins the Temporal CLI (the local development server) outside
// the main module, so its large dependency tree never enters dqnflow's go.mod.
package tools

import _ "github.com/temporalio/cli/cmd/temporal"
