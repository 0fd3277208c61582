//go:build tools

// Package tools pins versitygw, the S3-compatible server the object-store
// tests start (its posix backend serves a local directory), outside the main
// module and outside the Temporal CLI's module, so neither dependency tree
// moves the other's versions.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
