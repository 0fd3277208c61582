package blas

import (
	"fmt"
	"os"
	"sync"
)

// accelerateLib is Apple's Accelerate framework, present on every macOS.
var accelerateLib = library{
	envVar:  "DQNFLOW_ACCELERATE",
	sonames: []string{"/System/Library/Frameworks/Accelerate.framework/Accelerate"},
	hint:    "Accelerate is part of macOS; choose --blas gonum or openblas",
}

var accelerate struct {
	once sync.Once
	lib  *native
	err  error
}

// openAccelerate opens Accelerate. Its BLAS threads are set by the
// environment (VECLIB_MAXIMUM_THREADS), not by a call, so threads is only
// reported when that variable says the same.
func openAccelerate(threads int) (BLAS, error) {
	accelerate.once.Do(func() {
		path, h, err := accelerateLib.open("blas accelerate", "sgemm_")
		if err != nil {
			accelerate.err = err
			return
		}
		b := &native{name: NameAccelerate, path: path}
		b.sgemm, _ = dlsym(h, "sgemm_")
		b.threads = func() int {
			var k int
			if _, err := fmt.Sscan(os.Getenv("VECLIB_MAXIMUM_THREADS"), &k); err == nil && k > 0 {
				return k
			}
			return gomaxprocs()
		}
		b.describe = func() string {
			return fmt.Sprintf("accelerate (vecLib, up to %d threads by VECLIB_MAXIMUM_THREADS or the core count, %s)", b.threads(), path)
		}
		b.nthreads.Store(int32(b.threads()))
		accelerate.lib = b
	})
	if accelerate.err != nil {
		return nil, accelerate.err
	}
	return accelerate.lib, nil
}
