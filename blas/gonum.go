package blas

import (
	"fmt"
	"runtime"
	"sync"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Tile sizes of Gonum.Sgemm. gonum's Sgemm takes its serial path when the
// output has fewer than four 64×64 blocks, so a 64×192 tile always does.
const (
	tileRows = 64
	tileCols = 192
)

// Gonum is the pure-Go BLAS: gonum's float32 kernels, with the output cut
// into tiles shared among Workers goroutines (GOMAXPROCS when ≤ 0).
type Gonum struct {
	Workers int
	// Why says why "auto" chose gonum; empty when it was asked for.
	Why string
}

// Name returns "gonum".
func (Gonum) Name() string { return NameGonum }

// Threads returns the number of goroutines a product may use.
func (g Gonum) Threads() int {
	if g.Workers <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return g.Workers
}

// WithThreads returns g with k workers (GOMAXPROCS when k ≤ 0).
func (g Gonum) WithThreads(k int) BLAS { g.Workers = k; return g }

// Describe says what runs, e.g. "gonum (pure Go, 2 threads)".
func (g Gonum) Describe() string {
	s := fmt.Sprintf("gonum (pure Go, %d threads)", g.Threads())
	if g.Why != "" {
		s += ": " + g.Why
	}
	return s
}

// SequentialSums reports true: see Sgemm.
func (Gonum) SequentialSums() bool { return true }

// Sgemm computes C = op(A)·op(B) + β·C with gonum's float32 Sgemm (see
// BLAS.Sgemm for the shapes). The output is cut into tiles of at most
// 64×192, each computed by one Sgemm call on gonum's serial path, and the
// tiles are shared among the workers. With B not transposed, gonum's
// serial kernels are axpy updates C[i,·] += op(A)[i,l]·B[l,·] for l = 0, 1,
// …, k−1 in order (skipping op(A)[i,l] = 0, which can only change the sign
// of a zero or avoid 0·Inf), so every C[i,j] is the float32 sum over l in
// index order, rounded after each product and each addition, whatever m,
// n, the tiling, the number of workers or the SIMD alignment of the data:
// a row of the output depends only on the same row of op(A) (batch
// invariance), and results are bit-identical from run to run and machine to
// machine. With tB, gonum computes dot products whose lane order depends on
// memory alignment, so callers that need the sequential sum (trainer/cpu)
// pass a transposed copy of B instead.
func (g Gonum) Sgemm(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	call := gemmCall{tA: tA, tB: tB, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	call.colTiles = (n + tileCols - 1) / tileCols
	tiles := ((m + tileRows - 1) / tileRows) * call.colTiles
	workers := min(g.Threads(), tiles)
	if workers <= 1 {
		for t := range tiles {
			call.tile(t)
		}
		return
	}
	// Only this branch allocates: the shared call, the variables the
	// goroutines capture (declared here, so the serial branch keeps its own
	// on the stack) and the goroutines.
	shared, nw, nt := new(gemmCall), workers, tiles
	*shared = call
	var wg sync.WaitGroup
	for w := 1; w < nw; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := w; t < nt; t += nw {
				shared.tile(t)
			}
		}()
	}
	for t := 0; t < nt; t += nw {
		shared.tile(t)
	}
	wg.Wait()
}

// gemmCall holds the arguments of one Sgemm call.
type gemmCall struct {
	tA, tB   bool
	m, n, k  int
	a        []float32
	lda      int
	b        []float32
	ldb      int
	beta     float32
	c        []float32
	ldc      int
	colTiles int
}

// tile computes output tile t (row-major over the tiles) with one Sgemm.
func (g *gemmCall) tile(t int) {
	i0, j0 := (t/g.colTiles)*tileRows, (t%g.colTiles)*tileCols
	mi, nj := min(tileRows, g.m-i0), min(tileCols, g.n-j0)
	ta, aSub := gblas.Trans, g.a[i0:] // A is k×m: columns i0…
	if !g.tA {
		ta, aSub = gblas.NoTrans, g.a[i0*g.lda:] // A is m×k: rows i0…
	}
	tb, bSub := gblas.NoTrans, g.b[j0:] // B is k×n: columns j0…
	if g.tB {
		tb, bSub = gblas.Trans, g.b[j0*g.ldb:] // B is n×k: rows j0…
	}
	gonum.Implementation{}.Sgemm(ta, tb, mi, nj, g.k, 1, aSub, g.lda, bSub, g.ldb, g.beta, g.c[i0*g.ldc+j0:], g.ldc)
}
