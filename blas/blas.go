package blas

import (
	"errors"
	"fmt"
	"runtime"
)

// Names of the implementations, as --blas and RunConfig's blas take them.
const (
	NameAuto       = "auto"
	NameGonum      = "gonum"
	NameOpenBLAS   = "openblas"
	NameAccelerate = "accelerate"
)

// Names lists the values Open accepts.
var Names = []string{NameAuto, NameGonum, NameOpenBLAS, NameAccelerate}

// ErrNotFound is wrapped by the error of Open for a library that is not
// installed or does not load.
var ErrNotFound = errors.New("BLAS library not found")

// BLAS is one implementation of the products the CPU backend needs. Its
// methods are safe for concurrent use.
type BLAS interface {
	// Name is NameGonum, NameOpenBLAS or NameAccelerate: what runs.
	Name() string
	// Describe says what runs in one line: library, version, CPU kernel,
	// threads, and why "auto" chose it.
	Describe() string
	// Threads is the number of threads a product may use.
	Threads() int
	// WithThreads returns the implementation with k threads (GOMAXPROCS
	// when k ≤ 0). For OpenBLAS this is process-wide (see the package doc).
	WithThreads(k int) BLAS
	// SequentialSums reports whether every output of Sgemm with B not
	// transposed is the float32 sum of its products in index order, bit for
	// bit on every machine (gonum), rather than a blocked FMA sum that
	// depends on the CPU (an optimised BLAS).
	SequentialSums() bool
	// Sgemm computes, with all matrices row-major and α = 1,
	//
	//	C = op(A)·op(B) + β·C,   C[i,j] = β·C[i,j] + Σ_l op(A)[i,l]·op(B)[l,j]
	//
	// where op(A) is A (m×k, row stride lda) or, with tA, Aᵀ (A is k×m),
	// op(B) is B (k×n, row stride ldb) or, with tB, Bᵀ (B is n×k), and C is
	// m×n with row stride ldc. With β = 0, C is not read (a NaN there does
	// not propagate). The slices must hold the elements the shapes and
	// strides address; a shorter slice panics before any C code runs.
	Sgemm(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

// Open returns the implementation called name (one of Names) with threads
// threads (GOMAXPROCS when ≤ 0). "auto" is the machine's optimised BLAS
// when one opens, gonum otherwise, and its Describe says why. A library
// asked for by name that does not open is an error wrapping ErrNotFound
// that names every path tried and how to install it.
func Open(name string, threads int) (BLAS, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	switch name {
	case NameGonum:
		return Gonum{Workers: threads}, nil
	case NameOpenBLAS:
		return openOpenBLAS(threads)
	case NameAccelerate:
		return openAccelerate(threads)
	case NameAuto, "":
		native := NameOpenBLAS
		if runtime.GOOS == "darwin" {
			native = NameAccelerate
		}
		b, err := Open(native, threads)
		if err == nil {
			return b, nil
		}
		return Gonum{Workers: threads, Why: fmt.Sprintf("auto chose gonum because %s did not open: %v", native, err)}, nil
	}
	return nil, fmt.Errorf("blas %q: must be one of %q", name, Names)
}

// Available returns the implementations that open on this machine, gonum
// first, each with threads threads. Tests run their suites over it.
func Available(threads int) []BLAS {
	var out []BLAS
	for _, name := range []string{NameGonum, NameOpenBLAS, NameAccelerate} {
		if b, err := Open(name, threads); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// checkGemm panics, before any C code could read or write out of bounds,
// when a slice is shorter than the shapes and strides of an Sgemm call say
// or a stride is smaller than its row. These are programming errors of the
// caller, as an index out of range is.
func checkGemm(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ar, ac := m, k
	if tA {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB {
		br, bc = n, k
	}
	for _, x := range []struct {
		name           string
		rows, cols, ld int
		have           int
	}{{"A", ar, ac, lda, len(a)}, {"B", br, bc, ldb, len(b)}, {"C", m, n, ldc, len(c)}} {
		if x.ld < max(x.cols, 1) {
			panic(fmt.Sprintf("blas: sgemm %s: stride %d < %d columns", x.name, x.ld, x.cols))
		}
		if x.rows > 0 && x.cols > 0 && x.have < (x.rows-1)*x.ld+x.cols {
			panic(fmt.Sprintf("blas: sgemm %s: %d elements, %d×%d with stride %d needs %d", x.name, x.have, x.rows, x.cols, x.ld, (x.rows-1)*x.ld+x.cols))
		}
	}
}
