package cpu

import (
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Tile sizes of gemm. gonum's Sgemm takes its serial path when the output
// has fewer than four 64×64 blocks, so a 64×192 tile always does.
const (
	tileRows = 64
	tileCols = 192
)

// gemm computes C = op(A)·B + β·C with gonum's float32 Sgemm, where op(A)
// is A (m×k) or, with tA, Aᵀ (A is k×m), B is k×n and C is m×n, all
// row-major, and β is 1 or 0 (then C is not read):
//
//	C[i,j] = β·C[i,j] + Σ_l op(A)[i,l]·B[l,j]
//
// The output is cut into tiles of at most 64×192, each computed by one
// Sgemm call on gonum's serial path, and the tiles are shared among
// workers goroutines. With B not transposed, gonum's serial kernels are
// axpy updates C[i,·] += op(A)[i,l]·B[l,·] for l = 0, 1, …, k−1 in order
// (skipping op(A)[i,l] = 0, which can only change the sign of a zero or
// avoid 0·Inf), so every C[i,j] is the float32 sum over l in index order,
// rounded after each product and each addition, whatever m, n, the tiling,
// the number of workers or the SIMD alignment of the data: a row of the
// output depends only on the same row of op(A) (batch invariance), and
// results are bit-identical from run to run. That is why the forward pass multiplies by a transposed copy
// of W instead of asking for Bᵀ: gonum computes A·Bᵀ with dot products
// whose lane order depends on memory alignment (they are ~10% faster).
func gemm(workers int, tA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	g := gemmCall{tA: tA, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	g.colTiles = (n + tileCols - 1) / tileCols
	tiles := ((m + tileRows - 1) / tileRows) * g.colTiles
	workers = min(workers, tiles)
	if workers <= 1 {
		for t := range tiles {
			g.tile(t)
		}
		return
	}
	// Only this branch allocates: the shared call, the variables the
	// goroutines capture (declared here, so the serial branch keeps its own
	// on the stack) and the goroutines.
	shared, nw, nt := new(gemmCall), workers, tiles
	*shared = g
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

// gemmCall holds the arguments of one gemm call.
type gemmCall struct {
	tA       bool
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
	ta, aSub := blas.Trans, g.a[i0:] // A is k×m: columns i0…
	if !g.tA {
		ta, aSub = blas.NoTrans, g.a[i0*g.lda:] // A is m×k: rows i0…
	}
	gonum.Implementation{}.Sgemm(ta, blas.NoTrans, mi, nj, g.k, 1, aSub, g.lda, g.b[j0:], g.ldb, g.beta, g.c[i0*g.ldc+j0:], g.ldc)
}
