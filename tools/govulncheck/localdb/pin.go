package main

// The vulnerability data `make vulncheck` checks against: one commit of the
// golang.org/x/vulndb repository (the source vuln.go.dev is generated
// from), as the module proxy serves it, and the hash of its module zip (the
// h1: line go.sum would hold, which the checksum database vouches for).
//
// To move to newer data, run
//
//	go mod download -json golang.org/x/vulndb@latest
//
// copy its Version and Sum here, then `make vulncheck`.
const (
	vulndbModule  = "golang.org/x/vulndb"
	vulndbVersion = "v0.0.0-20261105234957-e22db6528018"
	vulndbSum     = "h1:mfngRv0Yoh0VApsXKEN82CjD99kl7mtparN3bs3JnqI="
)
