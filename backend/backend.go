// Package backend picks the trainer backend for a device name. The choice is
// never silent: Open returns a description of what was chosen and why, and
// a device that cannot run is an error, not a fallback.
package backend

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
)

// Choice is what Open chose for a device name, for the log.
type Choice struct {
	// Summary is one short line: the device, and for "auto" on the CPU
	// the reason in a few words ("no NVIDIA driver found; using the CPU
	// (2 threads)").
	Summary string
	// Detail is what a fallback's Summary leaves out: the full error of
	// the device "auto" tried (the libraries and folders searched, what
	// to install); "" when nothing failed.
	Detail string
}

// Open returns the backend for device ("cpu", "auto", "cuda", "cuda:N") and
// the choice it made; a CUDA backend runs tuning tu (gpu.TuningFromEnv in
// the CLI and the worker). "cuda" is device 0; "auto" takes CUDA device 0 when
// it opens (driver, device and NVRTC all found) and otherwise the CPU,
// saying why.
func Open(device string, tu gpu.Tuning) (trainer.Backend, Choice, error) {
	threads := runtime.GOMAXPROCS(0)
	switch {
	case device == "cpu":
		return cpu.Backend{}, Choice{Summary: fmt.Sprintf("cpu (%d threads; the run's blas setting picks the matrix library)", threads)}, nil
	case device == "auto":
		b, err := gpu.NewBackend(0, tu)
		if err != nil {
			return cpu.Backend{}, Choice{
				Summary: fmt.Sprintf("%s; using the CPU (%d threads)", Unusable(err, "cuda:0 is not usable"), threads),
				Detail:  "auto tried cuda:0: " + err.Error(),
			}, nil
		}
		return b, Choice{Summary: "auto chose cuda: " + b.Describe()}, nil
	case device == "cuda" || strings.HasPrefix(device, "cuda:"):
		ordinal := 0
		if s, ok := strings.CutPrefix(device, "cuda:"); ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return nil, Choice{}, fmt.Errorf("device %q: want cuda:N with N a device number", device)
			}
			ordinal = n
		}
		b, err := gpu.NewBackend(ordinal, tu)
		if err != nil {
			return nil, Choice{}, fmt.Errorf("device %q: %w (%w); use --device cpu", device, err, trainer.ErrUnsupported)
		}
		return b, Choice{Summary: "cuda: " + b.Describe()}, nil
	}
	return nil, Choice{}, fmt.Errorf("device %q: want cpu, auto, cuda or cuda:N", device)
}

// Unusable says in a few words why err kept CUDA from opening: a missing
// driver or NVRTC library, else otherwise (the error itself says why, at
// length).
func Unusable(err error, otherwise string) string {
	switch {
	case errors.Is(err, cuda.ErrNoDriver):
		return "no NVIDIA driver found"
	case errors.Is(err, cuda.ErrNoNVRTC):
		return "no NVRTC library found"
	}
	return otherwise
}
