package backend_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// TestAutoWithoutADriverSaysSoInOneShortLine: on a machine without the
// NVIDIA driver, Open("auto") and Discover("auto") choose the CPU with a
// summary of a few words, and keep the driver error, with the library
// names it tried, as the detail.
func TestAutoWithoutADriverSaysSoInOneShortLine(t *testing.T) {
	if _, err := cuda.Devices(); !errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("this machine has the NVIDIA driver (cuda.Devices: %v)", err)
	}
	b, c, err := backend.Open("auto", gpu.DefaultTuning())
	if err != nil {
		t.Fatal(err)
	}
	if b == nil || !strings.HasPrefix(c.Summary, "no NVIDIA driver found; using the CPU (") || len(c.Summary) > 60 {
		t.Errorf("Open(auto) summary %q (%d characters); want \"no NVIDIA driver found; using the CPU (N threads)\"", c.Summary, len(c.Summary))
	}
	if !strings.Contains(c.Detail, "libcuda.so.1") || !strings.HasPrefix(c.Detail, "auto tried cuda:0: ") {
		t.Errorf("Open(auto) detail %q; want the driver error naming libcuda.so.1", c.Detail)
	}
	d, err := backend.Discover("auto", 0, gpu.DefaultTuning())
	if err != nil {
		t.Fatal(err)
	}
	if d.Choice != "auto chose the CPU: no NVIDIA driver found" || !strings.Contains(d.Detail, "libcuda.so.1") {
		t.Errorf("Discover(auto): choice %q, detail %q; want the short reason and the driver error", d.Choice, d.Detail)
	}
	if _, c, _ := backend.Open("cpu", gpu.DefaultTuning()); c.Detail != "" {
		t.Errorf("Open(cpu) has a detail %q: nothing failed", c.Detail)
	}
}

// TestUnusableNamesTheMissingLibrary: the short reason follows the
// error's cause through wrapping.
func TestUnusableNamesTheMissingLibrary(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.Join(errors.New("open CUDA device 0"), cuda.ErrNoDriver), "no NVIDIA driver found"},
		{errors.Join(errors.New("compile kernels"), cuda.ErrNoNVRTC), "no NVRTC library found"},
		{errors.New("CUDA_ERROR_OUT_OF_MEMORY"), "cuda:0 is not usable"},
	} {
		if got := backend.Unusable(c.err, "cuda:0 is not usable"); got != c.want {
			t.Errorf("Unusable(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
