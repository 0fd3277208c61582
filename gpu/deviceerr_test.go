package gpu

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/trainer"
)

// TestCUDAFaultsAreDeviceFailures: a CUDA error in a trainer's work means
// the device or its context failed (trainer.ErrDevice, so the worker stops
// taking runs), except running out of memory; other errors pass unchanged.
func TestCUDAFaultsAreDeviceFailures(t *testing.T) {
	fault := fmt.Errorf("train: %w", &cuda.Error{Call: "cuStreamSynchronize", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"})
	if err := deviceErr(fault); !errors.Is(err, trainer.ErrDevice) {
		t.Errorf("an illegal address: %v, want trainer.ErrDevice", err)
	}
	var ce *cuda.Error
	if err := deviceErr(fault); !errors.As(err, &ce) || ce.Code != 700 {
		t.Errorf("the CUDA error is lost: %v", err)
	}
	oom := &cuda.Error{Call: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	if err := deviceErr(oom); errors.Is(err, trainer.ErrDevice) {
		t.Errorf("out of memory: %v, want no device failure", err)
	}
	plain := errors.New("train: 3 steps: must not be negative")
	if err := deviceErr(plain); err != plain {
		t.Errorf("a plain error changed: %v", err)
	}
	if deviceErr(nil) != nil {
		t.Error("nil became an error")
	}
}
