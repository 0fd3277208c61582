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
