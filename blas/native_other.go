//go:build !linux && !darwin

package blas

import (
	"fmt"
	"runtime"
)

// openOpenBLAS fails: this build loads shared libraries on Linux and macOS
// only.
func openOpenBLAS(int) (BLAS, error) {
	return nil, fmt.Errorf("blas openblas: %w: run-time loading is built for Linux and macOS, this is %s; choose gonum", ErrNotFound, runtime.GOOS)
}
