package step

import (
	"math"
	"math/rand/v2"
	"testing"
)

// tf32 rounds x to TF32 (10 fraction bits) to nearest, ties away from
// zero: PTX's cvt.rna.tf32.f32, which kernels/gemm.cu tfSplit uses. The
// result is a float32 whose low 13 fraction bits are zero.
func tf32(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7f800000 == 0x7f800000 { // Inf, NaN
		return x
	}
	b = (b + 1<<12) &^ (1<<13 - 1)
	return math.Float32frombits(b)
}

// dot3xTF32 is one output of gemmTf32 emulated on the host: k steps of 8,
// each adding a_small·b_big, a_big·b_small and a_big·b_big into a float32
// accumulator in that order (each TF32 product is exact in float32; the
// tensor cores' own order inside a k step is their business, and this
// emulation sums the eight products of a step in k order).
func dot3xTF32(a, b []float32) float32 {
	var acc float32
	for k0 := 0; k0 < len(a); k0 += 8 {
		for _, term := range [3][2]bool{{false, true}, {true, false}, {true, true}} {
			for k := k0; k < min(k0+8, len(a)); k++ {
				ab, bb := tf32(a[k]), tf32(b[k])
				x, y := a[k]-ab, b[k]-bb
				x, y = tf32(x), tf32(y)
				if term[0] {
					x = ab
				}
				if term[1] {
					y = bb
				}
				acc += x * y
			}
		}
	}
	return acc
}

// TestTF32SplitKeepsFloat32Accuracy backs ADR 0021's numerics on the host:
// three TF32 products per product (a_small·b_big + a_big·b_small +
// a_big·b_big) keep a dot product within the GEMM test's tolerance of
// float64 (1e-5·Σ|a·b|) and within a few times the error of float32 fmaf
// in k order, while TF32 alone is hundreds of times worse; and the
// self-check's row of 1+2⁻²⁰ tells float32 from TF32.
func TestTF32SplitKeepsFloat32Accuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 21))
	var worst3, worstF, worst1 float64
	for _, K := range []int{7, 64, 256, 1000} {
		for trial := 0; trial < 200; trial++ {
			a, b := make([]float32, K), make([]float32, K)
			for i := range a {
				a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			var want, mag float64
			var fma, one float32
			for i := range a {
				p := float64(a[i]) * float64(b[i])
				want += p
				mag += math.Abs(p)
				fma = float32(math.FMA(float64(a[i]), float64(b[i]), float64(fma)))
				one += tf32(a[i]) * tf32(b[i])
			}
			got := dot3xTF32(a, b)
			if e := math.Abs(float64(got)-want) / mag; e > 1e-5 {
				t.Fatalf("K=%d: 3xTF32 dot %g, float64 %g: error %.3g of Σ|a·b|, above the GEMM test's 1e-5", K, got, want, e)
			} else {
				worst3 = max(worst3, e)
			}
			worstF = max(worstF, math.Abs(float64(fma)-want)/mag)
			worst1 = max(worst1, math.Abs(float64(one)-want)/mag)
		}
	}
	t.Logf("worst error relative to Σ|a·b|: 3xTF32 %.3g, float32 fmaf %.3g, TF32 alone %.3g", worst3, worstF, worst1)
	if worst3 > 4*worstF {
		t.Errorf("3xTF32's worst error %.3g is more than 4× float32 fmaf's %.3g", worst3, worstF)
	}
	if worst1 < 100*worst3 {
		t.Errorf("TF32 alone (%.3g) is not clearly worse than 3xTF32 (%.3g): the split does nothing", worst1, worst3)
	}
	// The self-check's third row: 16 copies of 1+2⁻²⁰ against ones.
	row, ones := make([]float32, checkK), make([]float32, checkK)
	var one float32
	for i := range row {
		row[i], ones[i] = checkFine, 1
		one += tf32(row[i]) * tf32(ones[i])
	}
	if got := dot3xTF32(row, ones); got != checkFineF32 {
		t.Errorf("3xTF32 gives %v for 16×(1+2⁻²⁰), want %v (float32)", got, float32(checkFineF32))
	}
	if one != checkSumBF16 {
		t.Errorf("TF32 alone gives %v for 16×(1+2⁻²⁰), want 16 (the value the self-check refuses in fp32)", one)
	}
}
