//go:build !darwin

package blas

import (
	"fmt"
	"runtime"
)

// openAccelerate fails: Accelerate is Apple's.
func openAccelerate(int) (BLAS, error) {
	return nil, fmt.Errorf("blas accelerate: %w: Accelerate is part of macOS, this is %s; choose openblas or gonum", ErrNotFound, runtime.GOOS)
}
