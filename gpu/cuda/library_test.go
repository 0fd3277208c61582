package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMissingDriverIsErrNoDriverWithinASecond(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec libSpec
		env  string
		want []string // in the message
	}{
		{
			name: "search path and folders",
			spec: libSpec{
				envVar:  "DQNFLOW_TEST_LIBCUDA",
				sonames: []string{"libcuda-absent.so.1", "libcuda-absent.so"},
				dirs:    []string{"/nonexistent/lib64", "/usr/lib/x86_64-linux-gnu"},
				hint:    driverSpec.hint,
			},
			want: []string{"libcuda-absent.so.1", "libcuda-absent.so", "/nonexistent/lib64", "DQNFLOW_TEST_LIBCUDA is unset", "install the NVIDIA driver"},
		},
		{
			name: "environment variable",
			spec: libSpec{envVar: "DQNFLOW_TEST_LIBCUDA", sonames: driverSpec.sonames, dirs: driverSpec.dirs, hint: driverSpec.hint},
			env:  "/nonexistent/libcuda.so.1",
			want: []string{"DQNFLOW_TEST_LIBCUDA=/nonexistent/libcuda.so.1", "tried /nonexistent/libcuda.so.1 ("},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DQNFLOW_TEST_LIBCUDA", tc.env)
			start := time.Now()
			lib, err := tc.spec.open(ErrNoDriver)
			if took := time.Since(start); took > time.Second {
				t.Errorf("failing to open took %v, want under a second", took)
			}
			if lib != nil || !errors.Is(err, ErrNoDriver) {
				t.Fatalf("open = %v, %v; want nil and an error wrapping ErrNoDriver", lib, err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
		})
	}
}

// On a machine without the driver, the public entry points fail fast with
// ErrNoDriver; on a GPU host they must succeed.
func TestDevicesAndOpenWithoutDriverFailFast(t *testing.T) {
	start := time.Now()
	devs, err := Devices()
	took := time.Since(start)
	if err == nil {
		t.Skipf("the driver loads here (%d devices); the GPU tests cover this machine", len(devs))
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Devices: %v; want an error wrapping ErrNoDriver", err)
	}
	if took > time.Second {
		t.Errorf("Devices took %v to fail, want under a second", took)
	}
	start = time.Now()
	d, err := Open(0)
	if d != nil || !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "device 0") {
		t.Fatalf("Open(0) = %v, %v; want an error naming device 0 and wrapping ErrNoDriver", d, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Open took %v to fail, want under a second", took)
	}
	if _, err := DriverVersion(); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("DriverVersion: %v; want ErrNoDriver", err)
	}
}

func TestCandidatesOrder(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"cuda-12.4/lib64/libx.so.1", "cuda-13.0/lib64/libx.so.1", "cuda-13.0/lib64/libx.so", "other/libx.so.1"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := libSpec{
		envVar:  "X",
		sonames: []string{"libx.so.1", "libx.so"},
		dirs:    []string{filepath.Join(root, "cuda-*/lib64"), filepath.Join(root, "missing"), filepath.Join(root, "other")},
	}
	got := spec.candidates(func(string) string { return "" })
	want := []string{
		"libx.so.1", "libx.so",
		filepath.Join(root, "cuda-13.0/lib64/libx.so.1"), // newest toolkit folder first
		filepath.Join(root, "cuda-13.0/lib64/libx.so"),
		filepath.Join(root, "cuda-12.4/lib64/libx.so.1"),
		filepath.Join(root, "other/libx.so.1"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates:\n got %q\nwant %q", got, want)
	}
	got = spec.candidates(func(k string) string {
		if k == "X" {
			return "/opt/libx.so.7"
		}
		return ""
	})
	if !slices.Equal(got, []string{"/opt/libx.so.7"}) {
		t.Errorf("with the environment variable set, candidates = %q; want only its path", got)
	}
}

// Every Go function type bound to a driver or NVRTC symbol must be one purego
// can call; purego checks this when registering, so registering each against
// a harmless libc address (never called) finds a bad type here, not on the
// GPU host.
func TestEveryBindingHasACallableType(t *testing.T) {
	libc, err := dlopen("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6 to borrow an address from: %v", err)
	}
	addr := dlsym(libc, "getpid")
	if addr == 0 {
		t.Fatal("libc.so.6 has no getpid")
	}
	var d driverAPI
	var n nvrtcAPI
	syms := append(d.symbols(), n.symbols()...)
	seen := map[string]bool{}
	for _, s := range syms {
		if seen[s.names[0]] {
			t.Errorf("%s is bound twice", s.names[0])
		}
		seen[s.names[0]] = true
		if err := register(s.fptr, addr); err != nil {
			t.Errorf("%s: %v", s.names[0], err)
		}
	}
	if d.cuLaunchKernel == nil || n.nvrtcCompileProgram == nil {
		t.Fatal("registering did not set the function variables")
	}
}

func TestBindNamesMissingSymbols(t *testing.T) {
	libc, err := dlopen("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	lib := &library{path: "libc.so.6", handle: libc}
	var getpid, optional, missing func() int32
	err = lib.bind([]symbol{
		{names: []string{"no_such_v2", "getpid"}, fptr: &getpid},
		{names: []string{"no_such_optional"}, fptr: &optional, optional: true},
		{names: []string{"no_such_required"}, fptr: &missing},
	}, "too old")
	if err == nil || !strings.Contains(err.Error(), "libc.so.6 lacks no_such_required (too old)") {
		t.Fatalf("bind error %v does not name the missing required symbol", err)
	}
	if strings.Contains(err.Error(), "no_such_optional") {
		t.Errorf("bind error names an optional symbol: %v", err)
	}
	if getpid == nil || getpid() != int32(os.Getpid()) {
		t.Error("the fallback name was not bound")
	}
	if optional != nil {
		t.Error("a missing optional symbol was bound")
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		err  Error
		want string
	}{
		{Error{Call: "cuLaunchKernel", Code: 701, Name: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", Msg: "too many resources requested for launch"},
			"cuLaunchKernel: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701): too many resources requested for launch"},
		{Error{Call: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION"},
			"nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
