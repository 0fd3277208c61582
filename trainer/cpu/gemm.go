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

// gemm computes C = op(A)·op(B) + β·C (β is 0 or 1) with gonum's float32
// Sgemm, where op(A) is m×k, op(B) is k×n and C is m×n, all row-major:
//
//	C[i,j] = β·C[i,j] + Σ_l op(A)[i,l]·op(B)[l,j]
//
// The output is cut into tiles of at most 64×192, each computed by one
// Sgemm call on gonum's serial path and the tiles shared among workers
// goroutines. Within a tile every element is a float32 dot product (for
// A·Bᵀ) or a chain of axpy updates (otherwise) over l in index order, with
// no split of the k dimension, so every C[i,j] is rounded the same way
// whatever m, n, the tiling or the number of workers: a row of the output
// depends only on the same row of the input (batch invariance), and results
// are bit-identical from run to run.
func gemm(workers int, tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	rowTiles := (m + tileRows - 1) / tileRows
	colTiles := (n + tileCols - 1) / tileCols
	tiles := rowTiles * colTiles
	tile := func(t int) {
		i0, j0 := (t/colTiles)*tileRows, (t%colTiles)*tileCols
		mi, nj := min(tileRows, m-i0), min(tileCols, n-j0)
		var ta, tb blas.Transpose
		var aSub, bSub []float32
		if tA { // A is k×m: the tile is columns i0…
			ta, aSub = blas.Trans, a[i0:]
		} else { // A is m×k: the tile is rows i0…
			ta, aSub = blas.NoTrans, a[i0*lda:]
		}
		if tB { // B is n×k: rows j0…
			tb, bSub = blas.Trans, b[j0*ldb:]
		} else { // B is k×n: columns j0…
			tb, bSub = blas.NoTrans, b[j0:]
		}
		gonum.Implementation{}.Sgemm(ta, tb, mi, nj, k, 1, aSub, lda, bSub, ldb, beta, c[i0*ldc+j0:], ldc)
	}
	workers = min(workers, tiles)
	if workers <= 1 {
		for t := range tiles {
			tile(t)
		}
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := w; t < tiles; t += workers {
				tile(t)
			}
		}()
	}
	for t := 0; t < tiles; t += workers {
		tile(t)
	}
	wg.Wait()
}
