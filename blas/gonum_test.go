package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randMatrix returns rows×cols standard normal values.
func randMatrix(r *rand.Rand, rows, cols int) []float32 {
	m := make([]float32, rows*cols)
	for i := range m {
		m[i] = float32(r.NormFloat64())
	}
	return m
}

// TestGonumIsSequentialFloat32Sum checks the property the CPU backend's
// portable determinism rests on: every output of Gonum.Sgemm with B not
// transposed equals, bit for bit, the float32 sum C[i,j] = β·C[i,j] +
// Σ_l op(A)[i,l]·B[l,j] taken in order l = 0, 1, …, k−1 with a rounding
// after each product and addition, for shapes spanning several tiles, both
// transpositions of A, β = 0 and 1, and 1 or 3 workers. A quarter of A is
// zero, as after a ReLU.
func TestGonumIsSequentialFloat32Sum(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, sh := range []struct{ m, n, k int }{{1, 1, 1}, {130, 400, 70}, {65, 193, 3}, {3, 5, 300}} {
		for _, tA := range []bool{false, true} {
			for _, beta := range []float32{0, 1} {
				for _, workers := range []int{1, 3} {
					name := fmt.Sprintf("%dx%dx%d tA=%v beta=%g workers=%d", sh.m, sh.n, sh.k, tA, beta, workers)
					a := make([]float32, sh.m*sh.k)
					for i := range a {
						if r.IntN(4) > 0 {
							a[i] = float32(r.NormFloat64())
						}
					}
					b, c := randMatrix(r, sh.k, sh.n), randMatrix(r, sh.m, sh.n)
					want := append([]float32(nil), c...)
					lda := sh.k
					at := func(i, l int) float32 { return a[i*lda+l] }
					if tA {
						lda = sh.m
						at = func(i, l int) float32 { return a[l*lda+i] }
					}
					for i := 0; i < sh.m; i++ {
						for j := 0; j < sh.n; j++ {
							var s float32 // β = 0: C is not read (BLAS convention)
							if beta == 1 {
								s = want[i*sh.n+j]
							}
							for l := 0; l < sh.k; l++ {
								s += float32(at(i, l) * b[l*sh.n+j])
							}
							want[i*sh.n+j] = s
						}
					}
					Gonum{Workers: workers}.Sgemm(tA, false, sh.m, sh.n, sh.k, a, lda, b, sh.n, beta, c, sh.n)
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: C[%d] = %g, sequential sum %g", name, i, c[i], want[i])
						}
					}
				}
			}
		}
	}
}
