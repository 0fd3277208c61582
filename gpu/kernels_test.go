package gpu

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// TestKernelsCompileForHopper compiles every embedded kernel for sm_90 in both
// storage modes through the same NVRTC binding the trainer uses. NVRTC needs
// no GPU, so a kernel that does not compile fails here, in make test, and not
// on a device visit. It skips only where no NVRTC library is installed.
func TestKernelsCompileForHopper(t *testing.T) {
	c, err := cuda.NewCompiler()
	if errors.Is(err, cuda.ErrNoNVRTC) {
		t.Skipf("no NVRTC library: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	src, err := kernelSource()
	if err != nil {
		t.Fatal(err)
	}
	for _, bf := range []bool{false, true} {
		for _, atoms := range []int{51, 2, 101} {
			m := config.Defaults().Model
			m.Atoms = atoms
			bin, log, err := c.Compile(src, "dqnflow.cu", 90, kernelOptions(m, bf)...)
			if err != nil {
				t.Fatalf("bf16=%v atoms=%d: %v\n%s", bf, atoms, err, log)
			}
			if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
				t.Fatalf("bf16=%v atoms=%d: NVRTC output is not an ELF cubin", bf, atoms)
			}
			for _, name := range kernelNames {
				if !bytes.Contains(bin, []byte(name)) {
					t.Errorf("bf16=%v atoms=%d: kernel %s missing from the cubin", bf, atoms, name)
				}
			}
			if bf && !bytes.Contains(bin, []byte("HMMA")) && testing.Verbose() {
				t.Logf("cubin has no HMMA string (expected: SASS is binary)")
			}
		}
	}
}
