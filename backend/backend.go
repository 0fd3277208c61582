// Package backend picks the trainer backend for a device name. The choice is
// never silent: Open returns a description of what was chosen and why, and
// a device that cannot run is an error, not a fallback.
package backend

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
)

// Open returns the backend for device ("cpu", "auto", "cuda", "cuda:N") and
// a one-line description of the choice for the log. "cuda" is device 0;
// "auto" takes CUDA device 0 when it opens (driver, device and NVRTC all
// found) and otherwise the CPU, saying why.
func Open(device string) (trainer.Backend, string, error) {
	cpuDesc := fmt.Sprintf("cpu (%d threads; the run's blas setting picks the matrix library)", runtime.GOMAXPROCS(0))
	switch {
	case device == "cpu":
		return cpu.Backend{}, cpuDesc, nil
	case device == "auto":
		b, err := gpu.NewBackend(0)
		if err != nil {
			return cpu.Backend{}, fmt.Sprintf("auto chose %s: cuda:0 is not usable: %v", cpuDesc, err), nil
		}
		return b, "auto chose cuda: " + b.Describe(), nil
	case device == "cuda" || strings.HasPrefix(device, "cuda:"):
		ordinal := 0
		if s, ok := strings.CutPrefix(device, "cuda:"); ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return nil, "", fmt.Errorf("device %q: want cuda:N with N a device number", device)
			}
			ordinal = n
		}
		b, err := gpu.NewBackend(ordinal)
		if err != nil {
			return nil, "", fmt.Errorf("device %q: %w (%w); use --device cpu", device, err, trainer.ErrUnsupported)
		}
		return b, "cuda: " + b.Describe(), nil
	}
	return nil, "", fmt.Errorf("device %q: want cpu, auto, cuda or cuda:N", device)
}
