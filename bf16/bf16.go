// Package bf16 converts between float32 and bfloat16 (the upper 16 bits of
// an IEEE binary32). github.com/x448/float16 is IEEE binary16, a different
// format, so the few lines here are our own.
package bf16

import "math"

// BF16 is a bfloat16 value: sign, 8 exponent bits, 7 mantissa bits.
type BF16 uint16

// FromFloat32 rounds f to the nearest bfloat16, ties to even. NaN stays NaN
// (quiet, sign kept); values past the largest finite bfloat16 round to Inf,
// as IEEE round-to-nearest does.
func FromFloat32(f float32) BF16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep sign and top payload, force quiet
		return BF16(u>>16 | 0x0040)
	}
	// Round to nearest even: add 0x7fff plus the lowest kept bit, truncate.
	u += 0x7fff + (u>>16)&1
	return BF16(u >> 16)
}

// Float32 widens b exactly.
func (b BF16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// Round returns f rounded to the nearest bfloat16 value, as a float32.
func Round(f float32) float32 { return FromFloat32(f).Float32() }

// RoundSlice rounds every element of x to bfloat16 in place.
func RoundSlice(x []float32) {
	for i, v := range x {
		x[i] = Round(v)
	}
}

// FromFloat32Stochastic rounds f to one of the two bfloat16 values around
// it at random: with r uniform in [0, 2¹⁶) (the low 16 bits of bits), f
// rounds away from zero with probability (dropped bits)/2¹⁶, its distance
// from the value towards zero in units of that gap, so that
// E[Float32(result)] = f (Gupta et al. 2015, "Deep learning with limited
// numerical precision", §3). In bits:
//
//	result = (bits(f) + (r mod 2¹⁶)) >> 16
//
// A value already a bfloat16 is kept exactly. NaN stays NaN as in
// FromFloat32; Inf stays Inf; a value within 2¹⁶ of the largest finite
// bfloat16's bits may round up to Inf, as its expected value requires.
func FromFloat32Stochastic(f float32, bits uint32) BF16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return BF16(u>>16 | 0x0040)
	}
	if u&0x7fffffff == 0x7f800000 {
		return BF16(u >> 16)
	}
	return BF16((u + (bits & 0xffff)) >> 16)
}

// RoundStochastic is FromFloat32Stochastic(f, bits) widened to float32.
func RoundStochastic(f float32, bits uint32) float32 {
	return FromFloat32Stochastic(f, bits).Float32()
}

// SRBits returns the random bits of the stochastic rounding of parameter
// index at Adam step step of a run seeded with seed: a counter-based hash,
// so any backend draws the same bits for the same (seed, step, index) in
// any order, and a resumed run the same as an uninterrupted one. It is
// SplitMix64's finaliser (Steele et al. 2014) applied twice,
//
//	x = mix(seed ⊕ srSalt + γ·(step+1)),  x = mix(x + γ·(index+1)),  bits = x >> 32
//
// with γ = 0x9e3779b97f4a7c15, in wrapping 64-bit arithmetic (the CUDA
// kernel sr_bits in gpu/kernels/optim.cu computes the same).
func SRBits(seed uint64, step int64, index int) uint32 {
	x := mix64((seed ^ srSalt) + srGamma*uint64(step+1))
	x = mix64(x + srGamma*uint64(index+1))
	return uint32(x >> 32)
}

// srSalt separates the rounding stream from the run's other streams of the
// same seed ("bf16sr" in ASCII).
const srSalt = 0x626631367372

const srGamma = 0x9e3779b97f4a7c15

// mix64 is SplitMix64's output function.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
