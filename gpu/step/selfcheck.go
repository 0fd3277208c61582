package step

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"math"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// Self-check operands. Row 0 is 16 copies of 1+2⁻¹⁰, which bf16 storage
// rounds to 1 (bf16 keeps 7 fraction bits); row 1 is 1 followed by 15 copies
// of 2⁻⁹, all exact in bf16, whose sum 1+15·2⁻⁹ survives only in an
// accumulator wider than bf16 (each 2⁻⁹ is below half an ulp of 1 in bf16).
// Row 2 is 16 copies of 1+2⁻²⁰, exact in float32 but 1 in TF32 (10
// fraction bits): float32 products give 16+2⁻¹⁶, TF32 products 16, so
// the check also tells float32 (on the CUDA cores or as 3xTF32) from TF32.
// B is all ones, so C = row sums.
const (
	checkK       = 16
	checkWide    = 1 + 1.0/1024      // 1+2⁻¹⁰
	checkSmall   = 1.0 / 512         // 2⁻⁹
	checkFine    = 1 + 1.0/(1<<20)   // 1+2⁻²⁰
	checkSumF32  = 16 * checkWide    // 16.015625, float32 operands
	checkSumBF16 = 16                // bf16 operands
	checkAcc     = 1 + 15*checkSmall // 1.029296875, float32 accumulation
	checkFineF32 = 16 * checkFine    // 16+2⁻¹⁶, float32 significands
)

// SelfCheck runs the training GEMM, on the device, on operands converted by
// the training path's own conversion kernel, and checks that the result is
// the one the storage mode claims: bf16 operands with float32 accumulation
// in bf16-mixed, float32 throughout in fp32. It returns a line for Info,
// the run's row and every checkpoint; a device that computes anything else
// is an error, never a silent relabelling. The result is kept per mode and
// fp32 GEMM path.
// describe names the device in the errors.
func SelfCheck(d *device.Device, su device.Setup, describe string, m config.ModelConfig, bf16 bool) (string, error) {
	key := device.ModuleKey{BF16: bf16, TF32: !bf16 && su.TC()}
	return d.Checked(key, func() (string, error) { return gemmCheck(d, su, describe, m, bf16) })
}

// gemmCheck is selfCheck's run on the device.
func gemmCheck(d *device.Device, su device.Setup, describe string, m config.ModelConfig, bf16 bool) (string, error) {
	tc := su.TC()
	var got [3]float32
	err := onScratch(d, su, m, bf16, func(c *cuda.Ctx, k *device.Kernels, s cuda.Stream, mem *device.Arena) error {
		esz := 4
		if bf16 {
			esz = 2
		}
		a32 := make([]float32, 3*checkK)
		for i := range checkK {
			a32[i] = checkWide
			a32[checkK+i] = checkSmall
			a32[2*checkK+i] = checkFine
		}
		a32[checkK] = 1
		ones := make([]float32, checkK)
		for i := range ones {
			ones[i] = 1
		}
		bt := mem.Batch(c, s)
		af, bf := bt.Alloc(4*len(a32)), bt.Alloc(4*len(ones))
		ae, be := bt.Alloc(esz*len(a32)), bt.Alloc(esz*len(ones))
		out := bt.Alloc(4 * len(got))
		if err := bt.Err; err != nil {
			return err
		}
		sh, w, blocks, err := gemmCall(bf16, tc, []job{{a: mat{ae, checkK, 1}, b: mat{be, 1, 1}, c: mat{out, 1, 1}, m: len(got), n: 1, k: checkK, epi: epiStore}})
		if err != nil {
			return err
		}
		jp := bt.Alloc(8 * len(w))
		if err := bt.Err; err != nil {
			return err
		}
		if err := cuda.Upload(c, af, a32); err != nil {
			return err
		}
		if err := cuda.Upload(c, bf, ones); err != nil {
			return err
		}
		if err := cuda.Upload(c, jp, []uint64(w)); err != nil {
			return err
		}
		for _, x := range [][2]cuda.DevPtr{{af, ae}, {bf, be}} {
			n := int64(len(a32))
			if x[0] == bf {
				n = checkK
			}
			if err := c.Launch(k.Fn["cast_rows"], device.Dim(1), device.Dim(256), 0, s, x[0], x[1], n); err != nil {
				return err
			}
		}
		if err := c.Launch(k.Fn[sh.Name], device.Dim(blocks), device.Dim(sh.Threads), sh.Shared, s, jp, int32(1), cuda.DevPtr(0)); err != nil {
			return err
		}
		if err := c.Sync(s); err != nil {
			return err
		}
		return cuda.Download(c, got[:], out)
	})
	if err != nil {
		return "", fmt.Errorf("precision self-check: %w", err)
	}
	wantOps, wantFine, ops := float32(checkSumF32), float32(checkFineF32), "f32"
	if bf16 {
		wantOps, wantFine, ops = checkSumBF16, checkSumBF16, "bf16"
	}
	if got[0] != wantOps || got[1] != checkAcc || got[2] != wantFine {
		return "", fmt.Errorf("precision self-check failed on %s: 16×(1+2⁻¹⁰) gave %v (want %v for %s operands), 1+15×2⁻⁹ gave %v (want %v for f32 accumulation) and 16×(1+2⁻²⁰) gave %v (want %v): the device does not compute what the mode claims",
			describe, got[0], wantOps, ops, got[1], float32(checkAcc), got[2], wantFine)
	}
	s := fmt.Sprintf("gemm operands %s (16×(1+2⁻¹⁰) → %v, 16×(1+2⁻²⁰) → %v), accumulation f32 (1+15×2⁻⁹ → %v)", ops, got[0], got[2], got[1])
	if !bf16 {
		s += ", " + fp32GEMMPath(tc)
	}
	return s, nil
}

// stateCheckN is the number of values the state self-check rounds.
const stateCheckN = 4096

// StateCheck backs the claim of precision bf16 that the trained state is
// stored as bf16 values, rounded as trainer/cpu rounds it: it runs the
// rounding functions of kernel adamw (kernel round_check, the same device
// code) on stateCheckN values around 1 and spread over the exponent range,
// with the run's seed, and compares the random bits with bf16.SRBits, the
// nearest rounding with bf16.Round and the stochastic rounding with
// bf16.RoundStochastic, bit for bit. It returns a line for Info; any
// difference is an error.
func StateCheck(d *device.Device, su device.Setup, describe string, m config.ModelConfig, seed uint64) (string, error) {
	x := make([]float32, stateCheckN)
	for i := range x {
		switch i % 3 {
		case 0: // 1 + k·2⁻¹⁶: between bf16 neighbours of 1, every rounding case
			x[i] = 1 + float32(i/3)*(1.0/65536)
		case 1: // spread over the exponents, both signs
			x[i] = float32(math.Ldexp(1+float64(i%97)/97, i%200-100))
			if i%2 == 1 {
				x[i] = -x[i]
			}
		default: // a typical weight update: 0.03 − 1e-5·k
			x[i] = 0.03 - 1e-5*float32(i)
		}
	}
	const step = 12345
	bits := make([]uint32, stateCheckN)
	nearest := make([]float32, stateCheckN)
	stoch := make([]float32, stateCheckN)
	err := onScratch(d, su, m, true, func(c *cuda.Ctx, k *device.Kernels, s cuda.Stream, mem *device.Arena) error {
		bt := mem.Batch(c, s)
		xp, bp, np, sp := bt.Alloc(4*stateCheckN), bt.Alloc(4*stateCheckN), bt.Alloc(4*stateCheckN), bt.Alloc(4*stateCheckN)
		if err := bt.Err; err != nil {
			return err
		}
		if err := cuda.Upload(c, xp, x); err != nil {
			return err
		}
		if err := c.Launch(k.Fn["round_check"], device.Dim(device.CeilDiv(stateCheckN, 256)), device.Dim(256), 0, s,
			xp, int64(stateCheckN), int64(seed), int64(step), bp, np, sp); err != nil {
			return err
		}
		if err := c.Sync(s); err != nil {
			return err
		}
		for _, d := range []error{cuda.Download(c, bits, bp), cuda.Download(c, nearest, np), cuda.Download(c, stoch, sp)} {
			if d != nil {
				return d
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("bf16 state self-check: %w", err)
	}
	moved := 0
	for i, v := range x {
		want := bf16.SRBits(seed, step, i)
		if bits[i] != want {
			return "", fmt.Errorf("bf16 state self-check failed on %s: stochastic-rounding bits of index %d are %#x on the device, %#x in bf16.SRBits", describe, i, bits[i], want)
		}
		if math.Float32bits(nearest[i]) != math.Float32bits(bf16.Round(v)) {
			return "", fmt.Errorf("bf16 state self-check failed on %s: %g rounds to %g on the device, %g in bf16.Round", describe, v, nearest[i], bf16.Round(v))
		}
		if w := bf16.RoundStochastic(v, want); math.Float32bits(stoch[i]) != math.Float32bits(w) {
			return "", fmt.Errorf("bf16 state self-check failed on %s: %g rounds stochastically to %g on the device, %g in bf16.RoundStochastic", describe, v, stoch[i], w)
		}
		if stoch[i] != nearest[i] {
			moved++
		}
	}
	return fmt.Sprintf("state bf16: %d stores rounded to nearest and stochastically as bf16.Round and bf16.RoundStochastic with bf16.SRBits (seed %d), bit for bit (%d of them rounded the other way stochastically)",
		stateCheckN, seed, moved), nil
}

// onScratch runs f on d's thread with the module of model m in one
// storage mode, a stream of its own and an arena, both freed after: the
// self-checks' scratch space, apart from any trainer's.
func onScratch(d *device.Device, su device.Setup, m config.ModelConfig, bf16 bool, f func(c *cuda.Ctx, k *device.Kernels, s cuda.Stream, mem *device.Arena) error) error {
	return d.Dev.Do(func(c *cuda.Ctx) error {
		k, err := moduleFor(c, d, m, bf16, su)
		if err != nil {
			return err
		}
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		var mem device.Arena
		defer mem.Free(c)
		return f(c, k, s, &mem)
	})
}
