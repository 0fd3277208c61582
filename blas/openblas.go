//go:build linux || darwin

package blas

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
)

// openBLASLib is where OpenBLAS may be: the environment variable, the
// sonames of Debian and Ubuntu (libopenblas0-pthread, -openmp, -serial all
// provide libopenblas.so.0 through alternatives), Fedora and RHEL
// (libopenblasp: pthreads, libopenblaso: OpenMP), Arch and Alpine, then
// their folders and Homebrew's.
var openBLASLib = library{
	envVar: "DQNFLOW_OPENBLAS",
	sonames: []string{
		"libopenblas.so.0", "libopenblasp.so.0", "libopenblaso.so.0", "libopenblas.so",
		"libopenblas.dylib", "libopenblas.0.dylib",
	},
	paths: []string{
		"/usr/lib/*-linux-gnu/openblas-pthread/libopenblas.so.0",
		"/usr/lib/*-linux-gnu/openblas-openmp/libopenblas.so.0",
		"/usr/lib/*-linux-gnu/openblas-serial/libopenblas.so.0",
		"/usr/lib64/libopenblasp.so.0", "/usr/lib64/libopenblas.so.0",
		"/opt/homebrew/opt/openblas/lib/libopenblas.dylib",
		"/usr/local/opt/openblas/lib/libopenblas.dylib",
	},
	hint: "install OpenBLAS (Debian/Ubuntu: apt-get install libopenblas0; Fedora: dnf install openblas; macOS: brew install openblas), " +
		"set DQNFLOW_OPENBLAS to the library's path, or choose --blas gonum",
}

// coreTypeVar is OpenBLAS's environment variable that names the kernels
// to use instead of those its CPU detection picks.
const coreTypeVar = "OPENBLAS_CORETYPE"

// threadTimeoutVar is OpenBLAS's environment variable for how long an idle
// worker thread spins before it sleeps: 2^value cycles, 4 to 30.
const (
	threadTimeoutVar     = "OPENBLAS_THREAD_TIMEOUT"
	threadTimeoutDefault = "4"
)

// openBLAS is the process's OpenBLAS, opened once: its thread count is
// process-wide state.
var openBLAS struct {
	once sync.Once
	lib  *native
	err  error
}

// openOpenBLAS opens OpenBLAS (once per process) and sets its thread count
// to threads.
func openOpenBLAS(threads int) (BLAS, error) {
	openBLAS.once.Do(func() { openBLAS.lib, openBLAS.err = loadOpenBLAS() })
	if openBLAS.err != nil {
		return nil, openBLAS.err
	}
	return openBLAS.lib.WithThreads(threads), nil
}

func loadOpenBLAS() (*native, error) {
	// OpenBLAS picks its kernels once, while it loads: those named by
	// OPENBLAS_CORETYPE where set, else those its CPU detection finds.
	// dqnflow leaves the choice to it (on an AVX-512 CPU its detection was
	// as fast as forcing SkylakeX: docs/perf/cpu-coretype-2026-12-01.md),
	// and Describe says who chose.
	asked := os.Getenv(coreTypeVar)
	why := "detected by OpenBLAS"
	if asked != "" {
		why = coreTypeVar + "=" + asked
	}
	// OpenBLAS's idle worker threads spin (sched_yield) for 2^28 cycles,
	// about 0.1 s, before they sleep. The trainer alternates GEMMs with its
	// own parallel loops on the same cores, so between two GEMMs the
	// spinning workers take the cores from those loops: on 2 cores
	// make learn-check spent 33 s of its 69 s in system time. Unless the
	// user set it, OPENBLAS_THREAD_TIMEOUT=4 (2^4 cycles) for the load, the
	// value OpenBLAS reads once as it loads: learn-check 69 → 51 s, the
	// same bits (docs/perf/cpu-blas-2026-12-01.md).
	if os.Getenv(threadTimeoutVar) == "" {
		// os.Setenv reaches the C environment that OpenBLAS reads, also
		// without cgo (purego's runtime shim), and Describe reports what
		// OpenBLAS read (openblas_thread_timeout).
		if err := os.Setenv(threadTimeoutVar, threadTimeoutDefault); err != nil {
			return nil, fmt.Errorf("blas openblas: set %s: %w", threadTimeoutVar, err)
		}
		defer os.Unsetenv(threadTimeoutVar)
	}
	path, h, err := openBLASLib.open("blas openblas", "sgemm_", "openblas_set_num_threads", "openblas_get_num_threads")
	if err != nil {
		return nil, err
	}
	b := &native{name: NameOpenBLAS, path: path}
	var (
		setThreads func(int32)
		getThreads func() int32
		getConfig  func() string
		getCore    func() string
		getPar     func() int32
		getTimeout func() int32
	)
	for _, s := range []struct {
		fptr any
		name string
	}{
		{&setThreads, "openblas_set_num_threads"}, {&getThreads, "openblas_get_num_threads"},
		{&getConfig, "openblas_get_config"}, {&getCore, "openblas_get_corename"}, {&getPar, "openblas_get_parallel"},
		{&getTimeout, "openblas_thread_timeout"},
	} {
		if err := bind(s.fptr, h, s.name); err != nil {
			return nil, fmt.Errorf("blas openblas: %s: %w", path, err)
		}
	}
	b.sgemm, _ = dlsym(h, "sgemm_")
	b.threads = func() int { return int(getThreads()) }
	b.setThr = func(k int) { setThreads(int32(k)) }
	// openblas_get_config is e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY
	// Haswell MAX_THREADS=64"; keep its version and say which kernel the
	// CPU got and how the library threads.
	version := strings.TrimPrefix(getConfig(), "OpenBLAS ")
	if f := strings.Fields(version); len(f) > 0 {
		version = f[0]
	}
	core := getCore()
	if asked != "" && !strings.EqualFold(core, asked) {
		// A name OpenBLAS does not know, or kernels the CPU cannot run:
		// OpenBLAS chose others.
		why = "chosen by OpenBLAS, " + coreTypeVar + "=" + asked + " not taken"
	}
	parallel := map[int32]string{0: "sequential", 1: "pthreads", 2: "OpenMP"}[getPar()]
	// What OpenBLAS read, not what was asked: 0 is its default spin.
	idle := "idle threads spin 2^28 cycles"
	if t := getTimeout(); t > 0 {
		idle = fmt.Sprintf("idle threads sleep after 2^%d cycles", min(max(t, 4), 30))
	}
	b.describe = func() string {
		return fmt.Sprintf("openblas %s (%s kernels: %s; %s, %d threads, %s; %s)", version, core, why, parallel, b.Threads(), idle, path)
	}
	return b, nil
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
