// Package gputest holds what the tests of the gpu packages share: a skip
// where this machine has no CUDA device, device 0, and the tuning the
// tests run. Only tests import it.
package gputest

import (
	"errors"
	"os"
	"testing"

	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/gpu/device"
)

// SkipWithoutGPU skips t, with err as the reason, when err says this
// machine has no CUDA driver, device or NVRTC; with DQNFLOW_REQUIRE_GPU
// set (the device script) or any other error it fails t. Shared by the
// gpu packages' tests.
func SkipWithoutGPU(t *testing.T, err error) {
	t.Helper()
	var ce *cuda.Error
	noDev := errors.As(err, &ce) && (ce.Name == "CUDA_ERROR_NO_DEVICE" || ce.Name == "CUDA_ERROR_INVALID_DEVICE")
	if os.Getenv("DQNFLOW_REQUIRE_GPU") == "" && (errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoNVRTC) || noDev) {
		t.Skipf("no CUDA device here: %v", err)
	}
	t.Fatal(err)
}

// Device opens CUDA device 0 or skips with the reason.
func Device(t *testing.T) *device.Device {
	t.Helper()
	d, err := device.Open(0)
	if err != nil {
		SkipWithoutGPU(t, err)
	}
	return d
}

// Tuning is the tuning the tests run: TuningFromEnv, so that a device
// script can run them in another (tools/device/visit.sh sets DQNFLOW_*
// variables for a run of gpu.test).
func Tuning(t testing.TB) device.Tuning {
	t.Helper()
	tu, err := device.TuningFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return tu
}
