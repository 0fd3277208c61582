package kernels

import (
	"fmt"
	"strings"
)

// Shape is one of the kernel's tile shapes.
type Shape struct {
	Name    string
	BM, BN  int // tile rows (m) and columns (n)
	Threads int
	Shared  int // dynamic shared memory bytes (bf16 mode, fp32 on 3xTF32)
}

// GEMMShapes are the shapes of kernels/gemm.cu in the given mode (fp32 on
// 3xTF32 where tc); shared memory is GSTAGES·(tile A + tile B) bf16 in
// bf16 mode (k tiles of 32), static in fp32 on the CUDA cores.
//
// The large tiles run gemm128o and gemm128x64o: at most 128 registers,
// two 256-thread blocks per SM, k tiles of 32. Measured on an H200 at
// batch 16384 (docs/perf/gpu-2026-12-01.md) against the same with k tiles
// of 64 (gemm128p) and against 174 registers, one block per SM (gemm128,
// gemm128x64): 0.930, 0.936 and 1.062 ms per step; those two were removed
// (ADR 0021's addendum). (Four-stage pipelines and 128×256 or 256×128
// tiles were measured slower too, and removed: docs/perf/gpu-2026-12-02.md.)
func GEMMShapes(bf16, tc bool) []Shape {
	if !bf16 && tc {
		// 3xTF32 (kernels/gemm.cu gemmTf32): three stages of k tiles of 32
		// floats.
		stages := func(bm, bn int) int {
			elems := func(r int) int { return max(r*(32+4), 32*(r+8)) }
			return 3 * 4 * (elems(bm) + elems(bn))
		}
		return []Shape{{"gemm64", 64, 64, 128, stages(64, 64)}, {"gemm128o", 128, 128, 256, stages(128, 128)}, {"gemm128x64o", 128, 64, 128, stages(128, 64)}}
	}
	if !bf16 {
		return []Shape{{"gemm64", 64, 64, 256, 0}, {"gemm128o", 128, 128, 256, 0}, {"gemm128x64o", 128, 64, 256, 0}}
	}
	stages := func(bm, bn, bk int) int {
		elems := func(r int) int { return max(r*(bk+8), bk*(r+8)) }
		return 3 * 2 * (elems(bm) + elems(bn))
	}
	return []Shape{
		{"gemm64", 64, 64, 128, stages(64, 64, 32)},
		{"gemm128o", 128, 128, 256, stages(128, 128, 32)},
		{"gemm128x64o", 128, 64, 128, stages(128, 64, 32)},
	}
}

// WGMMAShapes are the tile shapes of the wgmma kernels (kernels/gemm.cu
// gemmWgmma) of a bf16 or an fp32 (3xTF32) module: 128 rows by 128 or 64
// columns, two warpgroups, k tiles of 128-byte rows (64 bf16 or 32
// floats), and 1 KB to align them. bf16 has three stages; fp32 has two
// stages of 128 columns or three of 64, and one more pair of tiles for
// the small parts of the split, so that two blocks fit on an SM.
//
// The square tile spills at two blocks an SM (128 registers) in both
// modes, in its epilogue (480 bytes of spill stores in bf16, 444 in fp32;
// ADR 0024's lean epilogue, which spills 0 and 12, was slower, and was
// removed), yet
// offering the narrow tile alone was slower: fp32 1.30 against 1.20 ms a
// step at batch 16384, bf16-mixed 0.600 against 0.587 (with the spills). A
// schedule that split the next k tile while this one's products ran (one
// barrier a tile; three stages and two pairs of small-part tiles, one
// block an SM) computed the same bits and was slower too: 1.314 against
// 1.196 ms at batch 16384, 0.431 against 0.413 at 4096 (ADR 0021).
func WGMMAShapes(bf16 bool) []Shape {
	tiles := func(n, bn int) int { return n*(128+bn)*128 + 1024 }
	if bf16 {
		return []Shape{{"wgmma128", 128, 128, 256, tiles(3, 128)}, {"wgmma128x64", 128, 64, 256, tiles(3, 64)}}
	}
	return []Shape{{"wgmma128", 128, 128, 256, tiles(2+1, 128)}, {"wgmma128x64", 128, 64, 256, tiles(3+1, 64)}}
}

// WGMMAMaskShapes are WGMMAShapes's tiles in the wgmma kernels of the
// mask epilogue (wgmma128m, wgmma128x64m): the backward's input gradients
// (ADR 0023), and nothing else.
func WGMMAMaskShapes(bf16 bool) []Shape {
	shapes := WGMMAShapes(bf16)
	for i := range shapes {
		shapes[i].Name += "m"
	}
	return shapes
}

// IsWGMMA reports whether tile shape sh is one of the wgmma kernels'.
func (sh Shape) IsWGMMA() bool { return strings.HasPrefix(sh.Name, "wgmma") }

// MasksOnly reports whether tile shape sh computes the mask epilogue
// alone (the "m" wgmma kernels); every other shape computes every
// epilogue but the wgmma forward kernels, which have no mask.
func (sh Shape) MasksOnly() bool { return sh.IsWGMMA() && strings.HasSuffix(sh.Name, "m") }

// ShapeNamed returns the shape called name in the given mode.
func ShapeNamed(bf16, tc bool, name string) (Shape, error) {
	var names []string
	for _, sh := range GEMMShapes(bf16, tc) {
		if sh.Name == name {
			return sh, nil
		}
		names = append(names, sh.Name)
	}
	return Shape{}, fmt.Errorf("no gemm tile shape %q in this mode (have %v)", name, names)
}
