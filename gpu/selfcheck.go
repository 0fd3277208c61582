package gpu

import (
	"fmt"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// Self-check operands. Row 0 is 16 copies of 1+2⁻¹⁰, which bf16 storage
// rounds to 1 (bf16 keeps 7 fraction bits); row 1 is 1 followed by 15 copies
// of 2⁻⁹, all exact in bf16, whose sum 1+15·2⁻⁹ survives only in an
// accumulator wider than bf16 (each 2⁻⁹ is below half an ulp of 1 in bf16).
// B is all ones, so C = row sums.
const (
	checkK       = 16
	checkWide    = 1 + 1.0/1024      // 1+2⁻¹⁰
	checkSmall   = 1.0 / 512         // 2⁻⁹
	checkSumF32  = 16 * checkWide    // 16.015625, float32 operands
	checkSumBF16 = 16                // bf16 operands
	checkAcc     = 1 + 15*checkSmall // 1.029296875, float32 accumulation
)

// selfCheck runs the training GEMM, on the device, on operands converted by
// the training path's own conversion kernel, and checks that the result is
// the one the storage mode claims: bf16 operands with float32 accumulation
// in bf16-mixed, float32 throughout in fp32. It returns a line for Info,
// the run's row and every checkpoint; a device that computes anything else
// is an error, never a silent relabelling. The result is kept per mode.
func (b *Backend) selfCheck(m config.ModelConfig, bf16 bool) (string, error) {
	b.d.mu.Lock()
	if s, ok := b.d.checks[bf16]; ok {
		b.d.mu.Unlock()
		return s, nil
	}
	b.d.mu.Unlock()
	var got [2]float32
	err := b.d.dev.Do(func(c *cuda.Ctx) error {
		k, err := b.d.module(c, m, bf16)
		if err != nil {
			return err
		}
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		var mem arena
		defer mem.free(c)
		esz := 4
		if bf16 {
			esz = 2
		}
		a32 := make([]float32, 2*checkK)
		for i := range checkK {
			a32[i] = checkWide
			a32[checkK+i] = checkSmall
		}
		a32[checkK] = 1
		ones := make([]float32, checkK)
		for i := range ones {
			ones[i] = 1
		}
		bt := mem.batch(c, s)
		af, bf := bt.alloc(4*len(a32)), bt.alloc(4*len(ones))
		ae, be := bt.alloc(esz*len(a32)), bt.alloc(esz*len(ones))
		out := bt.alloc(8)
		if err := bt.err; err != nil {
			return err
		}
		sh, w, blocks, err := gemmCall(bf16, []job{{a: mat{ae, checkK, 1}, b: mat{be, 1, 1}, c: mat{out, 1, 1}, m: 2, n: 1, k: checkK, epi: epiStore}})
		if err != nil {
			return err
		}
		jp := bt.alloc(8 * len(w))
		if err := bt.err; err != nil {
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
			n := int64(2 * checkK)
			if x[0] == bf {
				n = checkK
			}
			if err := c.Launch(k.fn["cast_rows"], dim(1), dim(256), 0, s, x[0], x[1], n); err != nil {
				return err
			}
		}
		if err := c.Launch(k.fn[sh.name], dim(blocks), dim(sh.threads), sh.shared, s, jp, int32(1), cuda.DevPtr(0)); err != nil {
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
	wantOps, ops := float32(checkSumF32), "f32"
	if bf16 {
		wantOps, ops = checkSumBF16, "bf16"
	}
	if got[0] != wantOps || got[1] != checkAcc {
		return "", fmt.Errorf("precision self-check failed on %s: 16×(1+2⁻¹⁰) gave %v (want %v for %s operands) and 1+15×2⁻⁹ gave %v (want %v for f32 accumulation): the device does not compute what the mode claims",
			b.Describe(), got[0], wantOps, ops, got[1], float32(checkAcc))
	}
	s := fmt.Sprintf("gemm operands %s (16×(1+2⁻¹⁰) → %v), accumulation f32 (1+15×2⁻⁹ → %v)", ops, got[0], got[1])
	b.d.mu.Lock()
	b.d.checks[bf16] = s
	b.d.mu.Unlock()
	return s, nil
}
