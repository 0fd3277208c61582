package cuda

import (
	"math"
	"strings"
	"testing"
	"unsafe"
)

// The parameter array cuLaunchKernel reads: ptrs[i] points at argument i's
// value in its C representation. Each case reads it back through a pointer of
// the kernel-side type, as the driver does.
func TestPackArgsLaysOutEachTypeAsC(t *testing.T) {
	args := []any{DevPtr(0x7f00_dead_beef), int32(-5), uint32(0xfedc_ba98), int64(-1 << 40), uint64(1<<63 + 3), float32(-1.5), float64(math.Pi)}
	k, err := packArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.ptrs) != len(args) || k.params() != &k.ptrs[0] {
		t.Fatalf("params has %d pointers, want %d, starting at ptrs[0]", len(k.ptrs), len(args))
	}
	for i := range args {
		if k.ptrs[i] != unsafe.Pointer(&k.slots[i]) {
			t.Errorf("ptrs[%d] does not point at slot %d", i, i)
		}
		if uintptr(k.ptrs[i])%8 != 0 {
			t.Errorf("argument %d is not 8-byte aligned", i)
		}
	}
	if got := *(*uint64)(k.ptrs[0]); got != 0x7f00_dead_beef {
		t.Errorf("DevPtr: %#x", got)
	}
	if got := *(*int32)(k.ptrs[1]); got != -5 {
		t.Errorf("int32: %d", got)
	}
	if got := *(*uint32)(k.ptrs[2]); got != 0xfedc_ba98 {
		t.Errorf("uint32: %#x", got)
	}
	if got := *(*int64)(k.ptrs[3]); got != -1<<40 {
		t.Errorf("int64: %d", got)
	}
	if got := *(*uint64)(k.ptrs[4]); got != 1<<63+3 {
		t.Errorf("uint64: %d", got)
	}
	if got := *(*uint32)(k.ptrs[5]); got != math.Float32bits(-1.5) {
		t.Errorf("float32 bits: %#x, want %#x", got, math.Float32bits(-1.5))
	}
	if got := *(*uint64)(k.ptrs[6]); got != math.Float64bits(math.Pi) {
		t.Errorf("float64 bits: %#x", got)
	}
	// A 4-byte argument occupies the first 4 bytes of its slot; on a
	// little-endian host that is the low half, with the high half zero.
	if k.slots[1] != 0x0000_0000_ffff_fffb || k.slots[5] != uint64(math.Float32bits(-1.5)) {
		t.Errorf("4-byte slots: %#x %#x", k.slots[1], k.slots[5])
	}
}

func TestPackArgsWithoutArgumentsIsNil(t *testing.T) {
	k, err := packArgs(nil)
	if err != nil || k.params() != nil {
		t.Fatalf("packArgs(nil) = %v, %v; want nil params", k.params(), err)
	}
}

func TestPackArgsRejectsOtherTypesNamingTheArgument(t *testing.T) {
	for _, tc := range []struct {
		arg  any
		want string
	}{
		{3, "argument 1 has type int;"},
		{uintptr(3), "argument 1 has type uintptr;"},
		{nil, "argument 1 has type <nil>;"},
		{&[]float32{1}, "argument 1 has type *[]float32;"},
		{int16(1), "argument 1 has type int16;"},
		{Stream(0), "argument 1 has type cuda.Stream;"},
		{true, "argument 1 has type bool;"},
	} {
		_, err := packArgs([]any{DevPtr(1), tc.arg})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("packArgs(%T): %v; want an error containing %q", tc.arg, err, tc.want)
		}
	}
}

func TestCheckPlainRefusesGoPointers(t *testing.T) {
	type pair struct {
		A float32
		B [2]uint16
	}
	type withSlice struct {
		A float32
		B []float32
	}
	if err := checkPlain[float32]("Upload"); err != nil {
		t.Error(err)
	}
	if err := checkPlain[pair]("Upload"); err != nil {
		t.Error(err)
	}
	if err := checkPlain[[4]int64]("Upload"); err != nil {
		t.Error(err)
	}
	for name, err := range map[string]error{
		"*float32":  checkPlain[*float32]("Upload"),
		"string":    checkPlain[string]("Upload"),
		"withSlice": checkPlain[withSlice]("Download"),
		"[2]any":    checkPlain[[2]any]("Upload"),
	} {
		if err == nil {
			t.Errorf("checkPlain[%s] accepted a type with Go pointers", name)
		}
	}
}

// cuLaunchKernelEx reads CUlaunchConfig and CUlaunchAttribute as cuda.h
// lays them out on a 64-bit host; the Go structs must match byte for byte.
func TestLaunchConfigHasTheLayoutOfCUlaunchConfig(t *testing.T) {
	var cfg launchConfig
	var a launchAttr
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(CUlaunchConfig)", unsafe.Sizeof(cfg), 56},
		{"offsetof(sharedMemBytes)", unsafe.Offsetof(cfg.shared), 24},
		{"offsetof(hStream)", unsafe.Offsetof(cfg.stream), 32},
		{"offsetof(attrs)", unsafe.Offsetof(cfg.attrs), 40},
		{"offsetof(numAttrs)", unsafe.Offsetof(cfg.numAttrs), 48},
		{"sizeof(CUlaunchAttribute)", unsafe.Sizeof(a), 72},
		{"offsetof(value)", unsafe.Offsetof(a.value), 8},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}
