package bf16

import (
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
)

// refFromFloat32 is an independent reference for FromFloat32 written from
// the definition of round-to-nearest-even rather than from bit tricks: it
// finds the two bfloat16 neighbours of x (truncation toward zero, and the
// next value away from zero, which is 2^128 past the largest finite one),
// measures both distances exactly in float64 and takes the nearer; on a tie
// it takes the one whose mantissa is even. A result of 2^128 is +-Inf, as
// IEEE 754 round-to-nearest overflows.
func refFromFloat32(x float32) uint16 {
	u := math.Float32bits(x)
	if x != x { // NaN: quiet, sign and top 7 payload bits kept
		return uint16(u>>16) | 0x0040
	}
	if math.IsInf(float64(x), 0) {
		return uint16(u >> 16)
	}
	sign := u & 0x80000000
	mag := u &^ 0x80000000
	lo := mag &^ 0xffff // |x| truncated: the neighbour toward zero
	if lo == mag {
		return uint16(u >> 16) // exactly representable
	}
	loV := float64(math.Float32frombits(lo))
	var hiV float64
	if lo == 0x7f7f0000 {
		hiV = math.Ldexp(1, 128) // one ulp past the largest finite bf16
	} else {
		hiV = float64(math.Float32frombits(lo + 0x10000))
	}
	xv := math.Abs(float64(x))
	dLo, dHi := xv-loV, hiV-xv // exact: float64 holds these differences
	var pick uint32
	switch {
	case dLo < dHi:
		pick = lo
	case dHi < dLo:
		pick = lo + 0x10000
	default: // tie: the even mantissa
		if lo&0x10000 == 0 {
			pick = lo
		} else {
			pick = lo + 0x10000
		}
	}
	return uint16((sign | pick) >> 16)
}

func isNaN16(b BF16) bool { return b&0x7f80 == 0x7f80 && b&0x007f != 0 }

// TestFromFloat32SpecialValues checks hand-worked cases at every edge of the
// format: zeros, subnormals, the largest finite value, the overflow boundary,
// infinities, NaNs and exact ties in both directions.
func TestFromFloat32SpecialValues(t *testing.T) {
	cases := []struct {
		name string
		in   uint32 // float32 bits
		want uint16
	}{
		{"+0", 0x00000000, 0x0000},
		{"-0", 0x80000000, 0x8000},
		{"1", 0x3f800000, 0x3f80},
		{"-2", 0xc0000000, 0xc000},
		{"smallest f32 subnormal rounds to +0", 0x00000001, 0x0000},
		{"smallest f32 subnormal, negative, rounds to -0", 0x80000001, 0x8000},
		{"smallest bf16 subnormal is exact", 0x00010000, 0x0001},
		{"largest bf16 subnormal is exact", 0x007f0000, 0x007f},
		{"largest f32 subnormal rounds up to smallest normal", 0x007fffff, 0x0080},
		{"half of the smallest bf16 subnormal ties to even 0", 0x00008000, 0x0000},
		{"just over half of the smallest subnormal rounds up", 0x00008001, 0x0001},
		{"smallest normal", 0x00800000, 0x0080},
		{"largest finite bf16 is exact", 0x7f7f0000, 0x7f7f},
		{"just under the overflow tie stays finite", 0x7f7f7fff, 0x7f7f},
		{"overflow tie rounds to Inf (odd mantissa 0x7f)", 0x7f7f8000, 0x7f80},
		{"largest finite f32 rounds to +Inf", 0x7f7fffff, 0x7f80},
		{"largest finite f32, negative, rounds to -Inf", 0xff7fffff, 0xff80},
		{"+Inf", 0x7f800000, 0x7f80},
		{"-Inf", 0xff800000, 0xff80},
		{"tie with even lower neighbour rounds down", 0x3f808000, 0x3f80},
		{"tie with odd lower neighbour rounds up", 0x3f818000, 0x3f82},
		{"negative tie with even neighbour rounds toward zero", 0xbf808000, 0xbf80},
		{"negative tie with odd neighbour rounds away from zero", 0xbf818000, 0xbf82},
		{"just above a tie rounds up", 0x3f808001, 0x3f81},
		{"just below a tie rounds down", 0x3f817fff, 0x3f81},
		{"rounding carries into the exponent", 0x3fffffff, 0x4000},
		{"quiet NaN", 0x7fc00000, 0x7fc0},
		{"negative quiet NaN keeps its sign", 0xffc00000, 0xffc0},
		{"signalling NaN with payload only in the low bits stays NaN", 0x7f800001, 0x7fc0},
		{"signalling NaN whose payload would round into Inf", 0x7f80ffff, 0x7fc0},
		{"NaN keeps the top payload bits", 0x7fa50000, 0x7fe5},
		{"negative NaN with low payload stays negative NaN", 0xff800001, 0xffc0},
	}
	for _, c := range cases {
		got := FromFloat32(math.Float32frombits(c.in))
		if uint16(got) != c.want {
			t.Errorf("%s: FromFloat32(%#08x) = %#04x, want %#04x", c.name, c.in, uint16(got), c.want)
		}
		if ref := refFromFloat32(math.Float32frombits(c.in)); ref != c.want {
			t.Errorf("%s: reference gives %#04x, want %#04x (the reference is wrong)", c.name, ref, c.want)
		}
	}
}

// TestNaNStaysNaN checks that every float32 NaN (all 2^24-2 of them, both
// signs) converts to a bfloat16 NaN with the same sign, never to Inf.
func TestNaNStaysNaN(t *testing.T) {
	for mant := uint32(1); mant < 1<<23; mant++ {
		for _, sign := range []uint32{0, 0x80000000} {
			u := sign | 0x7f800000 | mant
			b := FromFloat32(math.Float32frombits(u))
			if !isNaN16(b) || uint32(b>>15) != sign>>31 {
				t.Fatalf("FromFloat32(%#08x) = %#04x, want a NaN with sign %d", u, uint16(b), sign>>31)
			}
		}
	}
}

// TestRoundTripIsExact checks that widening every one of the 2^16 bfloat16
// values to float32 and converting back gives the same bits (NaNs: a NaN of
// the same sign, quieted).
func TestRoundTripIsExact(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		b := BF16(i)
		got := FromFloat32(b.Float32())
		if isNaN16(b) {
			if got != b|0x0040 {
				t.Fatalf("NaN %#04x round-trips to %#04x, want %#04x", i, uint16(got), uint16(b|0x0040))
			}
			continue
		}
		if got != b {
			t.Fatalf("%#04x round-trips to %#04x", i, uint16(got))
		}
		if r := Round(b.Float32()); math.Float32bits(r) != uint32(i)<<16 {
			t.Fatalf("Round(%v) = %v, want it unchanged", b.Float32(), r)
		}
	}
}

// TestFromFloat32MatchesReferenceAtEveryBoundary checks every bfloat16
// neighbourhood: all 2^16 upper halves combined with the low halves where
// rounding decides (0, 1, just below, at and above the tie, and the largest),
// which covers every exponent boundary, the overflow boundary and both tie
// directions for every mantissa.
func TestFromFloat32MatchesReferenceAtEveryBoundary(t *testing.T) {
	lows := []uint32{0x0000, 0x0001, 0x3fff, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xc000, 0xfffe, 0xffff}
	for hi := uint32(0); hi < 1<<16; hi++ {
		for _, lo := range lows {
			checkBits(t, hi<<16|lo)
		}
	}
}

// TestFromFloat32MatchesReferenceOnRandomBits compares FromFloat32 with the
// reference on 10^7 random float32 bit patterns (10^6 with -short).
func TestFromFloat32MatchesReferenceOnRandomBits(t *testing.T) {
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		checkBits(t, r.Uint32())
	}
}

// TestFromFloat32MatchesReferenceExhaustive compares FromFloat32 with the
// reference on all 2^32 float32 bit patterns. It takes tens of CPU seconds,
// so it runs only when DQNFLOW_EXHAUSTIVE=1; the boundary and random tests
// above cover every rounding case in the default run.
func TestFromFloat32MatchesReferenceExhaustive(t *testing.T) {
	if os.Getenv("DQNFLOW_EXHAUSTIVE") != "1" {
		t.Skip("set DQNFLOW_EXHAUSTIVE=1 to check all 2^32 float32 values")
	}
	workers := runtime.GOMAXPROCS(0)
	const chunks = 1 << 12
	next := make(chan uint32, chunks)
	for c := uint32(0); c < chunks; c++ {
		next <- c
	}
	close(next)
	var (
		mu    sync.Mutex
		first = uint64(math.MaxUint64)
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				base := c << 20
				for i := uint32(0); i < 1<<20; i++ {
					u := base | i
					if uint16(FromFloat32(math.Float32frombits(u))) != refFromFloat32(math.Float32frombits(u)) {
						mu.Lock()
						first = min(first, uint64(u))
						mu.Unlock()
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if first != math.MaxUint64 {
		u := uint32(first)
		t.Fatalf("FromFloat32(%#08x) = %#04x, reference %#04x", u,
			uint16(FromFloat32(math.Float32frombits(u))), refFromFloat32(math.Float32frombits(u)))
	}
}

func checkBits(t *testing.T, u uint32) {
	t.Helper()
	f := math.Float32frombits(u)
	got, want := uint16(FromFloat32(f)), refFromFloat32(f)
	if got != want {
		t.Fatalf("FromFloat32(%#08x = %g) = %#04x, reference %#04x", u, f, got, want)
	}
}

// TestRoundSlice checks that RoundSlice applies Round to every element.
func TestRoundSlice(t *testing.T) {
	x := []float32{1, 1.00390625, 1.01171875, float32(math.Inf(-1)), 3.0e38}
	want := []float32{1, 1, 1.015625, float32(math.Inf(-1)), Round(3.0e38)}
	RoundSlice(x)
	for i := range x {
		if x[i] != want[i] {
			t.Errorf("RoundSlice element %d = %v, want %v", i, x[i], want[i])
		}
	}
}

// TestStochasticRoundingIsUnbiased: over all 2¹⁶ values of the random
// bits, the results of FromFloat32Stochastic average to f exactly (in
// float64), each result is one of f's two bfloat16 neighbours, and the
// share rounded away from zero is the dropped fraction.
func TestStochasticRoundingIsUnbiased(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cases := []float32{1 + 1.0/1024, -3.14159, 1e-30, -7e20, 0.1, 2.5e-41, 3.3e38}
	for range 50 {
		cases = append(cases, math.Float32frombits(rng.Uint32()&0x7f7fffff|rng.Uint32()&0x80000000))
	}
	for _, f := range cases {
		u := math.Float32bits(f)
		lo, hi := BF16(u>>16), BF16(u>>16+1)
		var sum float64
		up := 0
		for r := range uint32(1 << 16) {
			b := FromFloat32Stochastic(f, r|0xabcd0000) // high bits are ignored
			switch b {
			case lo:
			case hi:
				up++
			default:
				t.Fatalf("%g with bits %#x rounded to %#04x, not a neighbour %#04x or %#04x", f, r, b, lo, hi)
			}
			sum += float64(b.Float32())
		}
		if hi&0x7fff == 0x7f80 { // rounding up overflows: the mean is Inf
			continue
		}
		if mean := sum / (1 << 16); mean != float64(f) {
			t.Errorf("%g: mean of the stochastic roundings %.17g, want %.17g", f, mean, float64(f))
		}
		if want := int(u & 0xffff); up != want {
			t.Errorf("%g: rounded away from zero %d times in 2¹⁶, want %d", f, up, want)
		}
	}
}

// TestStochasticRoundingKeepsExactAndSpecialValues: a bfloat16 value, ±0,
// ±Inf and NaN come back unchanged whatever the random bits.
func TestStochasticRoundingKeepsExactAndSpecialValues(t *testing.T) {
	for _, f := range []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, float32(math.Inf(1)), float32(math.Inf(-1)), Round(3.3e38)} {
		for _, r := range []uint32{0, 1, 0x8000, 0xffff} {
			if got := FromFloat32Stochastic(f, r); got != FromFloat32(f) {
				t.Errorf("FromFloat32Stochastic(%g, %#x) = %#04x, want %#04x", f, r, got, FromFloat32(f))
			}
		}
	}
	nan := math.Float32frombits(0x7fc00001)
	if b := FromFloat32Stochastic(nan, 0xffff); !isNaN16(b) {
		t.Errorf("NaN rounded stochastically to %#04x", b)
	}
}

// TestSRBitsAreAPureFunctionOfTheCounter: the bits depend on seed, step and
// index only; neighbouring counters give unrelated bits (each of the 32
// bits set in about half of 2¹⁶ consecutive indices), and the first values
// are pinned so that another implementation (the CUDA kernel) can be
// checked against them.
func TestSRBitsAreAPureFunctionOfTheCounter(t *testing.T) {
	if SRBits(1, 5, 9) != SRBits(1, 5, 9) {
		t.Fatal("SRBits is not deterministic")
	}
	seen := map[uint32]bool{}
	for _, c := range [][3]int64{{1, 1, 0}, {1, 1, 1}, {1, 2, 0}, {2, 1, 0}, {1, 0, 0}, {0, 0, 0}} {
		b := SRBits(uint64(c[0]), c[1], int(c[2]))
		if seen[b] {
			t.Errorf("SRBits%v repeats an earlier counter's bits %#x", c, b)
		}
		seen[b] = true
	}
	var ones [32]int
	const n = 1 << 16
	for i := range n {
		b := SRBits(1, 7, i)
		for k := range ones {
			ones[k] += int(b >> k & 1)
		}
	}
	for k, c := range ones {
		if c < n/2-4*128 || c > n/2+4*128 { // 4σ of a fair coin over 2¹⁶ draws
			t.Errorf("bit %d set in %d of %d indices, want about %d", k, c, n, n/2)
		}
	}
	for i, want := range []uint32{0xe0f7f4d2, 0x348d8839, 0x1cb407af, 0x035776ba} {
		if got := SRBits(1, 1, i); got != want {
			t.Errorf("SRBits(1, 1, %d) = %#x, want %#x (the pinned value the CUDA kernel is checked against)", i, got, want)
		}
	}
}
