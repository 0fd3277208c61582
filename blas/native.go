//go:build linux || darwin

package blas

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// native is an optimised BLAS in a shared library, called through purego.
// Products go through the Fortran interface sgemm_, whose arguments are all
// pointers: purego.SyscallN passes integer registers only (the C interface
// cblas_sgemm takes α and β in float registers), and it does not allocate,
// so a training step stays allocation-free.
type native struct {
	name     string  // NameOpenBLAS or NameAccelerate
	path     string  // the file opened
	sgemm    uintptr // sgemm_
	describe func() string
	threads  func() int
	setThr   func(int) // nil: the thread count cannot be set
	// nthreads caches threads(): reading it through purego's reflection
	// allocates, and the CPU backend asks at every parallel section.
	nthreads atomic.Int32
	args     sync.Pool // *gemmArgs
}

// gemmArgs is the memory that sgemm_'s scalar arguments point to, and the
// argument vector itself. Written inline in the SyscallN call, the 13
// arguments would be a new heap slice per call (SyscallN is
// go:uintptrescapes); passed as argv they cost nothing. That is safe
// because everything argv points to is on the heap, which Go's collector
// does not move: the pooled gemmArgs, and the matrices (see mats), which
// the KeepAlive calls after the call keep reachable.
type gemmArgs struct {
	ta, tb        byte
	m, n, k       int32
	lda, ldb, ldc int32
	alpha, beta   float32
	argv          [13]uintptr
	// mats holds A, B and C as pointers for the duration of the call: the
	// store into this heap object makes escape analysis put the matrices
	// on the heap even where a call is devirtualised and inlined.
	mats [3]unsafe.Pointer
}

func (b *native) Name() string     { return b.name }
func (b *native) Describe() string { return b.describe() }
func (b *native) Threads() int     { return int(b.nthreads.Load()) }

// SequentialSums reports false: optimised kernels block and fuse the sums.
func (b *native) SequentialSums() bool { return false }

// WithThreads sets the library's thread count (process-wide) and returns b.
func (b *native) WithThreads(k int) BLAS {
	if b.setThr != nil {
		b.setThr(threadCount(k))
	}
	b.nthreads.Store(int32(b.threads()))
	return b
}

// Sgemm computes C = op(A)·op(B) + β·C (see BLAS.Sgemm) with the
// library's sgemm_. Row-major C = op(A)·op(B) is column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ, so B goes first: the column-major view of a
// row-major B (k×n) is Bᵀ, and transposing op(B) there is "N" for B and
// "T" for Bᵀ.
func (b *native) Sgemm(tA, tB bool, m, n, k int, a []float32, lda int, bm []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemm(tA, tB, m, n, k, a, lda, bm, ldb, c, ldc)
	if k == 0 { // sgemm_ would do this too; a zero-length A or B has no &x[0]
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			for j := range row {
				if beta == 0 {
					row[j] = 0
				} else {
					row[j] *= beta
				}
			}
		}
		return
	}
	p, _ := b.args.Get().(*gemmArgs)
	if p == nil {
		p = new(gemmArgs)
	}
	*p = gemmArgs{ta: 'N', tb: 'N', m: int32(n), n: int32(m), k: int32(k),
		lda: int32(ldb), ldb: int32(lda), ldc: int32(ldc), alpha: 1, beta: beta}
	if tB {
		p.ta = 'T'
	}
	if tA {
		p.tb = 'T'
	}
	p.mats = [3]unsafe.Pointer{unsafe.Pointer(&a[0]), unsafe.Pointer(&bm[0]), unsafe.Pointer(&c[0])}
	p.argv = [13]uintptr{
		uintptr(unsafe.Pointer(&p.ta)), uintptr(unsafe.Pointer(&p.tb)),
		uintptr(unsafe.Pointer(&p.m)), uintptr(unsafe.Pointer(&p.n)), uintptr(unsafe.Pointer(&p.k)),
		uintptr(unsafe.Pointer(&p.alpha)),
		uintptr(unsafe.Pointer(&bm[0])), uintptr(unsafe.Pointer(&p.lda)),
		uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&p.ldb)),
		uintptr(unsafe.Pointer(&p.beta)),
		uintptr(unsafe.Pointer(&c[0])), uintptr(unsafe.Pointer(&p.ldc)),
	}
	purego.SyscallN(b.sgemm, p.argv[:]...)
	runtime.KeepAlive(a)
	runtime.KeepAlive(bm)
	runtime.KeepAlive(c)
	p.mats = [3]unsafe.Pointer{}
	b.args.Put(p)
}

// threadCount is k, or GOMAXPROCS when k ≤ 0.
func threadCount(k int) int {
	if k <= 0 {
		return gomaxprocs()
	}
	return k
}

// library says where a shared library may be and opens it.
type library struct {
	envVar  string   // a path that, when set, is the only one tried
	sonames []string // through the dynamic loader's search path, in order
	paths   []string // files (globs allowed) tried after the sonames
	hint    string   // how to install it, appended to the error
}

// candidates returns what l tries, in order.
func (l library) candidates() []string {
	if p := os.Getenv(l.envVar); p != "" {
		return []string{p}
	}
	out := slices.Clone(l.sonames)
	for _, pattern := range l.paths {
		m, _ := filepath.Glob(pattern) // the patterns are constants of this package
		for _, p := range m {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// open dlopens the first candidate that loads and has every symbol in
// need; the error wraps ErrNotFound and names everything tried.
func (l library) open(what string, need ...string) (path string, handle uintptr, err error) {
	tried := l.candidates()
	var errs []string
	for _, p := range tried {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		missing := ""
		for _, s := range need {
			if _, err := purego.Dlsym(h, s); err != nil {
				missing = s
				break
			}
		}
		if missing != "" {
			errs = append(errs, fmt.Sprintf("%s has no %s", p, missing))
			continue
		}
		return p, h, nil
	}
	env := l.envVar + " is unset"
	if v := os.Getenv(l.envVar); v != "" {
		env = l.envVar + "=" + v
	}
	first := "nothing to try"
	if len(errs) > 0 {
		first = errs[0]
	}
	return "", 0, fmt.Errorf("%s: %w: tried %s (%s): %s; %s", what, ErrNotFound, strings.Join(tried, ", "), env, first, l.hint)
}

// dlsym returns the address of name in handle.
func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

// bind makes *fptr call symbol name of handle, turning purego's panic on a
// function type it cannot call into an error.
func bind(fptr any, handle uintptr, name string) (err error) {
	addr, err := purego.Dlsym(handle, name)
	if err != nil {
		return fmt.Errorf("symbol %s: %w", name, err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("purego cannot bind %s as %T: %v", name, fptr, r)
		}
	}()
	purego.RegisterFunc(fptr, addr)
	return nil
}

// openBLASLibOpen runs OpenBLAS's search without the process-wide cache,
// for tests.
func openBLASLibOpen() (string, error) {
	p, _, err := openBLASLib.open("blas openblas", "sgemm_")
	return p, err
}
