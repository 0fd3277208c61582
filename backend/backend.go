// Package backend picks the trainer backend for a device name. The choice is
// never silent: Open returns a description of what was chosen and why, and
// a device that cannot run is an error, not a fallback.
package backend

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
)

// Open returns the backend for device ("cpu", "auto", "cuda", "cuda:N") and
// a one-line description of the choice for the log.
func Open(device string) (trainer.Backend, string, error) {
	switch {
	case device == "cpu":
		return cpu.Backend{}, fmt.Sprintf("cpu (pure-Go reference backend, %d threads)", runtime.GOMAXPROCS(0)), nil
	case device == "auto":
		return cpu.Backend{}, fmt.Sprintf("auto chose cpu (%d threads): this build has no CUDA backend yet", runtime.GOMAXPROCS(0)), nil
	case device == "cuda" || strings.HasPrefix(device, "cuda:"):
		return nil, "", fmt.Errorf("device %q: no CUDA backend in this build (%w); use --device cpu", device, trainer.ErrUnsupported)
	}
	return nil, "", fmt.Errorf("device %q: want cpu, auto, cuda or cuda:N", device)
}
