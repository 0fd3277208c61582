package cuda

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testCompiler opens NVRTC or skips. With DQNFLOW_REQUIRE_NVRTC=1 (set by
// .ci/run, which installs it) a missing NVRTC fails instead, so CI cannot
// silently stop compile-checking kernels.
func testCompiler(t *testing.T) *Compiler {
	t.Helper()
	c, err := NewCompiler()
	if err != nil {
		if errors.Is(err, ErrNoNVRTC) && os.Getenv("DQNFLOW_REQUIRE_NVRTC") != "1" {
			t.Skipf("no NVRTC on this machine (Debian: apt-get install libnvrtc11.2 from non-free, as .ci/run does): %v", err)
		}
		t.Fatalf("NewCompiler: %v", err)
	}
	return c
}

// requireCUBIN checks that b is a 64-bit little-endian ELF for the CUDA
// machine type, built for sm_<arch>, and returns it opened with debug/elf.
// CUBINs keep a format version in e_version (0x76 here), which debug/elf
// refuses, so it is parsed from a copy with e_version set to 1.
func requireCUBIN(t *testing.T, b []byte, arch int) *elf.File {
	t.Helper()
	if len(b) < 64 || !bytes.HasPrefix(b, []byte("\x7fELF")) {
		t.Fatalf("CUBIN (%d bytes) does not start with the ELF magic", len(b))
	}
	fixed := bytes.Clone(b)
	binary.LittleEndian.PutUint32(fixed[20:24], 1)
	f, err := elf.NewFile(bytes.NewReader(fixed))
	if err != nil {
		t.Fatalf("CUBIN is not an ELF file: %v", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Machine != elf.EM_CUDA {
		t.Fatalf("CUBIN is ELF %v %v machine %v, want ELFCLASS64 ELFDATA2LSB EM_CUDA", f.Class, f.Data, f.Machine)
	}
	// ELF ABI version 7 (up to CUDA 12.x) keeps the SM number in the low
	// byte of e_flags; later versions encode it differently.
	if abi := b[8]; abi == 7 {
		flags := binary.LittleEndian.Uint32(b[48:52])
		if int(flags&0xff) != arch {
			t.Fatalf("CUBIN e_flags %#x name sm_%d, want sm_%d", flags, flags&0xff, arch)
		}
	}
	return f
}

func TestCompilerReportsVersionAndPath(t *testing.T) {
	c := testCompiler(t)
	major, minor, err := c.Version()
	if err != nil {
		t.Fatal(err)
	}
	if major < 11 || minor < 0 {
		t.Fatalf("NVRTC version %d.%d, want 11.x or newer", major, minor)
	}
	if c.Path() == "" {
		t.Fatal("Path is empty")
	}
	t.Logf("NVRTC %d.%d from %s", major, minor, c.Path())
}

func TestCompileBF16TensorCoreKernelForSM90(t *testing.T) {
	c := testCompiler(t)
	cubin, log, err := c.Compile(bf16MMASource, "mma_bf16.cu", 90)
	if err != nil {
		t.Fatal(err)
	}
	f := requireCUBIN(t, cubin, 90)
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("CUBIN symbols: %v", err)
	}
	want := map[string]bool{"to_bf16": false, "mma_bf16_16x8x16": false}
	for _, s := range syms {
		if _, ok := want[s.Name]; ok {
			want[s.Name] = true
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("CUBIN lacks the kernel symbol %s (extern \"C\" names are unmangled)", name)
		}
	}
	if log != "" {
		t.Logf("NVRTC log: %s", log)
	}
}

// The graph tests' kernels compile for sm_90 without a GPU, the
// programmatic dependent launch's griddepcontrol instructions included,
// and BenchmarkGPUPhaseFloor's.
func TestCompileGraphTestKernelsForSM90(t *testing.T) {
	c := testCompiler(t)
	for _, k := range []struct{ src, name string }{{saxpySource, "saxpy.cu"}, {phaseSource, "phase.cu"}} {
		cubin, _, err := c.Compile(k.src, k.name, 90)
		if err != nil {
			t.Fatal(err)
		}
		requireCUBIN(t, cubin, 90)
	}
}

func TestCompileErrorIncludesLogWithLineNumber(t *testing.T) {
	c := testCompiler(t)
	src := "extern \"C\" __global__ void k(float* x) {\n" +
		"    x[0] = 1.0f;\n" +
		"    undeclared_name = 2;\n" +
		"}\n"
	cubin, log, err := c.Compile(src, "broken.cu", 90)
	if err == nil {
		t.Fatal("Compile of a broken kernel succeeded")
	}
	if cubin != nil {
		t.Errorf("Compile returned %d bytes with an error", len(cubin))
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Call != "nvrtcCompileProgram" || ce.Name != "NVRTC_ERROR_COMPILATION" {
		t.Errorf("error %v does not wrap an *Error from nvrtcCompileProgram NVRTC_ERROR_COMPILATION", err)
	}
	for _, s := range []string{"broken.cu(3)", "undeclared_name", "sm_90"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q:\n%v", s, err)
		}
	}
	if !strings.Contains(log, "broken.cu(3)") {
		t.Errorf("log lacks the line number: %q", log)
	}
}

func TestCompileArchOptionReplacesArch(t *testing.T) {
	c := testCompiler(t)
	src := "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }"
	for _, opt := range []string{"--gpu-architecture=sm_80", "-arch=sm_80"} {
		cubin, _, err := c.Compile(src, "k.cu", 90, opt)
		if err != nil {
			t.Fatalf("%s: %v", opt, err)
		}
		requireCUBIN(t, cubin, 80)
	}
}

func TestCompileRejectsBadInput(t *testing.T) {
	c := testCompiler(t)
	for _, tc := range []struct {
		name, src string
		arch      int
		opts      []string
	}{
		{"arch zero", "", 0, nil},
		{"arch compute-style", "", 1000, nil},
		{"NUL in source", "extern \"C\" __global__ void k() {}\x00", 90, nil},
		{"NUL in option", "extern \"C\" __global__ void k() {}", 90, []string{"-O3\x00"}},
		{"unknown option", "extern \"C\" __global__ void k() {}", 90, []string{"--no-such-option"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := c.Compile(tc.src, "k.cu", tc.arch, tc.opts...); err == nil {
				t.Fatal("Compile succeeded")
			}
		})
	}
}

func TestCompileCachedHitsTheCacheTheSecondTime(t *testing.T) {
	c := testCompiler(t)
	dir := filepath.Join(t.TempDir(), "kernels") // created by CompileCached
	first, err := c.CompileCached(dir, saxpySource, "saxpy.cu", 90)
	if err != nil {
		t.Fatal(err)
	}
	requireCUBIN(t, first, 90)
	n := c.compiles.Load()
	second, err := c.CompileCached(dir, saxpySource, "saxpy.cu", 90)
	if err != nil {
		t.Fatal(err)
	}
	if c.compiles.Load() != n {
		t.Fatalf("second CompileCached ran NVRTC again (%d compilations, want %d)", c.compiles.Load(), n)
	}
	if !bytes.Equal(first, second) {
		t.Fatal("cached CUBIN differs from the compiled one")
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(entries) != 1 || !strings.HasSuffix(entries[0], ".cubin") {
		t.Fatalf("cache folder holds %v, want one .cubin and no temporary files", entries)
	}
}

func TestCompileCachedKeyCoversEveryInput(t *testing.T) {
	c := testCompiler(t)
	base := c.cacheKey("src", "a.cu", 90, []string{"-O3"})
	for name, key := range map[string]string{
		"source":       c.cacheKey("src2", "a.cu", 90, []string{"-O3"}),
		"name":         c.cacheKey("src", "b.cu", 90, []string{"-O3"}),
		"architecture": c.cacheKey("src", "a.cu", 89, []string{"-O3"}),
		"options":      c.cacheKey("src", "a.cu", 90, nil),
		"option split": c.cacheKey("src", "a.cu", 90, []string{"-O", "3"}),
		"field shift":  c.cacheKey("srca.cu", "", 90, []string{"-O3"}),
		"nvrtc version": (&Compiler{api: c.api, major: c.major + 1, minor: c.minor}).
			cacheKey("src", "a.cu", 90, []string{"-O3"}),
	} {
		if key == base {
			t.Errorf("changing the %s leaves the cache key unchanged", name)
		}
	}
	if again := c.cacheKey("src", "a.cu", 90, []string{"-O3"}); again != base {
		t.Error("the cache key is not deterministic")
	}
}

func TestCompileCachedRecompilesACorruptEntry(t *testing.T) {
	c := testCompiler(t)
	good, err := c.CompileCached(t.TempDir(), saxpySource, "saxpy.cu", 90)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		corrupt func(path string) error
	}{
		{"truncated", func(p string) error { return os.Truncate(p, 100) }},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
		{"flipped byte", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0xff
			return os.WriteFile(p, b, 0o644)
		}},
		{"unreadable (a folder)", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := c.CompileCached(dir, saxpySource, "saxpy.cu", 90); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.cacheKey(saxpySource, "saxpy.cu", 90, nil)+".cubin")
			if err := tc.corrupt(path); err != nil {
				t.Fatal(err)
			}
			n := c.compiles.Load()
			got, err := c.CompileCached(dir, saxpySource, "saxpy.cu", 90)
			if tc.name == "unreadable (a folder)" {
				// The entry cannot be replaced by a rename over a folder: the
				// valid CUBIN comes back with the write error.
				if err == nil {
					t.Fatal("no error although the cache entry cannot be written")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if c.compiles.Load() != n+1 {
				t.Fatalf("a corrupt entry was not recompiled (%d compilations, want %d)", c.compiles.Load(), n+1)
			}
			if !bytes.Equal(got, good) {
				t.Fatal("recompiled CUBIN differs from the first compilation")
			}
			if tc.name != "unreadable (a folder)" {
				if _, err := readCacheEntry(path); err != nil {
					t.Fatalf("the entry was not rewritten: %v", err)
				}
			}
		})
	}
}

func TestCompileCachedReportsCompileErrors(t *testing.T) {
	c := testCompiler(t)
	dir := t.TempDir()
	_, err := c.CompileCached(dir, "extern \"C\" __global__ void k() { nope; }\n", "bad.cu", 90)
	if err == nil || !strings.Contains(err.Error(), "bad.cu(1)") {
		t.Fatalf("error %v lacks the compile log", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a failed compilation left %d cache entries", len(entries))
	}
}
