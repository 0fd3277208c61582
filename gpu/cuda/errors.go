package cuda

import (
	"errors"
	"fmt"
)

// Error is a non-zero status returned by a CUDA driver or NVRTC call.
type Error struct {
	Call string // the API function, e.g. "cuLaunchKernel"
	Code int    // the CUresult or nvrtcResult value
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // the driver's description; empty for NVRTC
}

// Error formats e as "cuLaunchKernel: CUDA_ERROR_X (code): msg".
func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

var (
	// ErrNoDriver is wrapped by every error caused by libcuda.so.1 not
	// opening: no NVIDIA driver on this machine, or not visible in this
	// container. The wrapping error lists the names and paths tried.
	ErrNoDriver = errors.New("cuda: the NVIDIA driver library libcuda.so.1 cannot be opened")
	// ErrNoNVRTC is wrapped by every error caused by libnvrtc not opening.
	// The wrapping error lists the names and paths tried.
	ErrNoNVRTC = errors.New("cuda: the NVRTC library libnvrtc cannot be opened")
	// ErrClosed is returned by Device.Do after Device.Close.
	ErrClosed = errors.New("cuda: device is closed")
)

// CUresult values this package reacts to (cuda.h).
const (
	cudaErrorNoDevice = 100 // CUDA_ERROR_NO_DEVICE
	cudaErrorNotFound = 500 // CUDA_ERROR_NOT_FOUND
)
