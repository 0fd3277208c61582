package gpu

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// Epilogues of the gemm kernel (kernels/gemm.cu).
const (
	epiStore    = 0
	epiBias     = 1
	epiBiasReLU = 2
	epiMask     = 3
)

// mat is a strided view of a device matrix: element (r, c) at
// p + esz·(r·sr + c·sc).
type mat struct {
	p      cuda.DevPtr
	sr, sc int64
}

// job is one product of a grouped gemm launch (struct GemmJob). A job with
// 0 < kchunk < k is split in k: split s writes its part of the sum to
// c + s·splitStride, and a grad_reduce segment adds the parts in order.
type job struct {
	a, b        mat
	c, ce       mat // float32 output, E output (either may be zero)
	mask        mat
	bias        cuda.DevPtr
	m, n, k     int
	epi         int
	kchunk      int
	splitStride int64
	// colsum (epiMask only): the column sums of the job's float32 results
	// per tile of rows, row tile t at colsum + 4·t·colsumStride (see
	// colsumParts).
	colsum       cuda.DevPtr
	colsumStride int64
	// csbm is the rows of a column-sum row tile: 0 for the launch shape's
	// bm. On the wgmma shapes it names the mma.sync tile (64 or 128 rows)
	// whose order of summation the kernel keeps (wgColSums), so that a
	// masked job gives the same bits on either kernel.
	csbm int
	// bT is B read from a transposed weight copy (k-contiguous), for an
	// input gradient that may run on wgmma (splitStage); zero if none. The
	// kernels never see it.
	bT mat
}

// colsumParts is the number of row tiles, and so of column-sum rows, of a
// job of m rows run in tiles of shape sh.
func colsumParts(m int, sh gemmShape) int { return ceilDiv(m, sh.bm) }

// gemmShape is one of the kernel's tile shapes.
type gemmShape struct {
	name    string
	bm, bn  int // tile rows (m) and columns (n)
	threads int
	shared  int // dynamic shared memory bytes (bf16 mode, fp32 on 3xTF32)
}

// gemmShapes are the shapes of kernels/gemm.cu in the given mode (fp32 on
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
func gemmShapes(bf16, tc bool) []gemmShape {
	if !bf16 && tc {
		// 3xTF32 (kernels/gemm.cu gemmTf32): three stages of k tiles of 32
		// floats.
		stages := func(bm, bn int) int {
			elems := func(r int) int { return max(r*(32+4), 32*(r+8)) }
			return 3 * 4 * (elems(bm) + elems(bn))
		}
		return []gemmShape{{"gemm64", 64, 64, 128, stages(64, 64)}, {"gemm128o", 128, 128, 256, stages(128, 128)}, {"gemm128x64o", 128, 64, 128, stages(128, 64)}}
	}
	if !bf16 {
		return []gemmShape{{"gemm64", 64, 64, 256, 0}, {"gemm128o", 128, 128, 256, 0}, {"gemm128x64o", 128, 64, 256, 0}}
	}
	stages := func(bm, bn, bk int) int {
		elems := func(r int) int { return max(r*(bk+8), bk*(r+8)) }
		return 3 * 2 * (elems(bm) + elems(bn))
	}
	return []gemmShape{
		{"gemm64", 64, 64, 128, stages(64, 64, 32)},
		{"gemm128o", 128, 128, 256, stages(128, 128, 32)},
		{"gemm128x64o", 128, 64, 128, stages(128, 64, 32)},
	}
}

// fp32GEMMPath describes where fp32 modules' GEMM products run, for the
// precision self-check's line.
func fp32GEMMPath(tc bool) string {
	if tc {
		return "products 3xTF32 on the tensor cores"
	}
	return "products fmaf on the CUDA cores: gpu tuning fp32_gemm = simt (DQNFLOW_FP32_GEMM)"
}

// wgmmaShapes are the tile shapes of the wgmma kernels (kernels/gemm.cu
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
func wgmmaShapes(bf16 bool) []gemmShape {
	tiles := func(n, bn int) int { return n*(128+bn)*128 + 1024 }
	if bf16 {
		return []gemmShape{{"wgmma128", 128, 128, 256, tiles(3, 128)}, {"wgmma128x64", 128, 64, 256, tiles(3, 64)}}
	}
	return []gemmShape{{"wgmma128", 128, 128, 256, tiles(2+1, 128)}, {"wgmma128x64", 128, 64, 256, tiles(3+1, 64)}}
}

// wgmmaMaskShapes are wgmmaShapes's tiles in the wgmma kernels of the
// mask epilogue (wgmma128m, wgmma128x64m): the backward's input gradients
// (ADR 0023), and nothing else.
func wgmmaMaskShapes(bf16 bool) []gemmShape {
	shapes := wgmmaShapes(bf16)
	for i := range shapes {
		shapes[i].name += "m"
	}
	return shapes
}

// isWGMMA reports whether tile shape sh is one of the wgmma kernels'.
func (sh gemmShape) isWGMMA() bool { return strings.HasPrefix(sh.name, "wgmma") }

// masksOnly reports whether tile shape sh computes the mask epilogue
// alone (the "m" wgmma kernels); every other shape computes every
// epilogue but the wgmma forward kernels, which have no mask.
func (sh gemmShape) masksOnly() bool { return sh.isWGMMA() && strings.HasSuffix(sh.name, "m") }

// wgmmaFits reports whether the wgmma kernels of a bf16 or fp32 module
// compute job j: A and B k-contiguous, no split in k (the forward products
// x·Wᵀ with their bias and ReLU, and the input gradients G·W against a
// transposed weight copy with their mask), column sums only in the order
// of a 64- or 128-row mma.sync tile (csbm, wgColSums), and more than one k
// tile (128-byte rows: 64 bf16, 32 floats). With one (the first layer in
// bf16, K = 64) the pipeline has nothing to overlap, and wgmma128x64 took
// 31.2 µs against mma.sync's 25.6 at batch 16384
// (docs/perf/gpu-2026-12-03-wgmma.md); in fp32 that layer is two tiles.
func (j job) wgmmaFits(bf16 bool) bool {
	tile := 32
	if bf16 {
		tile = 64
	}
	sums := j.colsum == 0 || j.csbm == 64 || j.csbm == 128
	return j.a.sc == 1 && j.b.sr == 1 && j.splits() == 1 && sums && j.k > tile
}

// fillBlocks is the number of blocks at which a launch keeps every SM of
// an H200 busy for two waves; a launch with fewer takes the shape that
// gives the most blocks.
const fillBlocks = 2 * 132

func (j job) splits() int {
	if j.kchunk <= 0 || j.kchunk >= j.k {
		return 1
	}
	return ceilDiv(j.k, j.kchunk)
}

func (j job) blocks(sh gemmShape) int {
	return ceilDiv(j.m, sh.bm) * ceilDiv(j.n, sh.bn) * j.splits()
}

// padded is the work of j in whole tiles of sh: what the launch computes,
// useful or not.
func (j job) padded(sh gemmShape) int64 {
	return int64(ceilDiv(j.m, sh.bm)*sh.bm) * int64(ceilDiv(j.n, sh.bn)*sh.bn) * int64(j.k)
}

// words writes j as the 28 words of struct GemmJob, its blocks starting at
// first in tiles of shape sh.
func (j job) words(w *words, first int, sh gemmShape) {
	csbm := j.csbm
	if csbm == 0 {
		csbm = sh.bm
	}
	kchunk := j.k
	if j.splits() > 1 {
		kchunk = j.kchunk
	}
	w.ptr(j.a.p).i64(j.a.sr).i64(j.a.sc)
	w.ptr(j.b.p).i64(j.b.sr).i64(j.b.sc)
	w.ptr(j.c.p).i64(j.c.sr).i64(j.c.sc)
	w.ptr(j.ce.p).i64(j.ce.sr).i64(j.ce.sc)
	w.ptr(j.mask.p).i64(j.mask.sr).i64(j.mask.sc)
	w.ptr(j.bias)
	w.i64(int64(j.m)).i64(int64(j.n)).i64(int64(j.k)).i64(int64(j.epi))
	w.i64(int64(first)).i64(int64(ceilDiv(j.m, sh.bm))).i64(int64(ceilDiv(j.n, sh.bn)))
	w.i64(int64(kchunk)).i64(j.splitStride)
	w.ptr(j.colsum).i64(j.colsumStride).i64(int64(csbm))
}

// check verifies what the kernel assumes of a job: each operand has a unit
// stride, the other stride and the base address are multiples of 16 bytes
// (so tiles move in 16-byte pieces), and only a plain store is split.
func (j job) check(esz int) error {
	vec := int64(16 / esz)
	operand := func(name string, x mat, rows, cols int) error {
		// x(r, k) = x.p + esz·(r·sr + k·sc); one of sr, sc is 1.
		var ld int64
		var other int
		switch {
		case x.sc == 1:
			ld, other = x.sr, rows
		case x.sr == 1:
			ld, other = x.sc, cols
		default:
			return fmt.Errorf("%s has strides (%d, %d), neither of them 1", name, x.sr, x.sc)
		}
		if uint64(x.p)%16 != 0 {
			return fmt.Errorf("%s at %#x is not 16-byte aligned", name, uint64(x.p))
		}
		if other > 1 && ld%vec != 0 {
			return fmt.Errorf("%s has leading stride %d, not a multiple of %d elements", name, ld, vec)
		}
		return nil
	}
	if err := operand("A", j.a, j.m, j.k); err != nil {
		return err
	}
	// B(k, n) = b.p + esz·(k·sr + n·sc): rows are n, the k stride is sr.
	if err := operand("B", mat{j.b.p, j.b.sc, j.b.sr}, j.n, j.k); err != nil {
		return err
	}
	for _, o := range []struct {
		name string
		x    mat
	}{{"C", j.c}, {"Ce", j.ce}, {"mask", j.mask}} {
		if o.x.p != 0 && o.x.sc != 1 && j.n > 1 {
			return fmt.Errorf("%s has column stride %d, not 1", o.name, o.x.sc)
		}
	}
	if j.colsum != 0 && (j.epi != epiMask || j.mask.p == 0 || j.colsumStride < int64(j.n)) {
		return fmt.Errorf("column sums with epilogue %d, mask %#x and stride %d", j.epi, uint64(j.mask.p), j.colsumStride)
	}
	if j.splits() > 1 && (j.epi != epiStore || j.splitStride < int64(j.m)*int64(j.n)) {
		return fmt.Errorf("split in k with epilogue %d and split stride %d", j.epi, j.splitStride)
	}
	return nil
}

// gemmCall chooses the tile shape for jobs and returns it with the jobs'
// words and the grid. Among the shapes whose launch fills the GPU
// (fillBlocks), it takes the one that computes the least padding, the
// bigger tile on a tie; when none fills it, the one with the most blocks.
func gemmCall(bf16, tc bool, jobs []job) (gemmShape, words, int, error) {
	best := gemmShapeFor(bf16, tc, jobs)
	w, blocks, err := gemmWords(best, bf16, jobs)
	return best, w, blocks, err
}

// gemmShapeFor is gemmCall's choice of tile shape for jobs.
func gemmShapeFor(bf16, tc bool, jobs []job) gemmShape { return shapeAmong(gemmShapes(bf16, tc), jobs) }

// shapeAmong is gemmCall's choice for jobs among shapes; on equal padding
// and blocks the first listed wins.
func shapeAmong(shapes []gemmShape, jobs []job) gemmShape {
	var best gemmShape
	bestFill, bestBlocks, bestPad := false, 0, int64(0)
	for _, sh := range shapes {
		blocks, pad := 0, int64(0)
		for _, j := range jobs {
			blocks += j.blocks(sh)
			pad += j.padded(sh)
		}
		fill := blocks >= fillBlocks
		better := best.name == "" ||
			(fill && !bestFill) ||
			(fill && bestFill && (pad < bestPad || pad == bestPad && blocks < bestBlocks)) ||
			(!fill && !bestFill && blocks > bestBlocks)
		if better {
			best, bestFill, bestBlocks, bestPad = sh, fill, blocks, pad
		}
	}
	return best
}

// gemmShapeNamed returns the shape called name in the given mode.
func gemmShapeNamed(bf16, tc bool, name string) (gemmShape, error) {
	var names []string
	for _, sh := range gemmShapes(bf16, tc) {
		if sh.name == name {
			return sh, nil
		}
		names = append(names, sh.name)
	}
	return gemmShape{}, fmt.Errorf("no gemm tile shape %q in this mode (have %v)", name, names)
}

// gemmWords checks jobs and returns their words for tile shape sh and the
// number of blocks of the launch.
func gemmWords(sh gemmShape, bf16 bool, jobs []job) (words, int, error) {
	esz := 4
	if bf16 {
		esz = 2
	}
	var w words
	first := 0
	wg := sh.isWGMMA()
	for i, j := range jobs {
		if err := j.check(esz); err != nil {
			return nil, 0, fmt.Errorf("gemm job %d of %d: %w", i, len(jobs), err)
		}
		if j.colsum != 0 && (wg && j.csbm != 64 && j.csbm != 128 || !wg && j.csbm != 0 && j.csbm != sh.bm) {
			return nil, 0, fmt.Errorf("gemm job %d of %d: column sums in row tiles of %d on %s", i, len(jobs), j.csbm, sh.name)
		}
		if wg && (j.epi == epiMask) != sh.masksOnly() {
			return nil, 0, fmt.Errorf("gemm job %d of %d: epilogue %d on %s, which computes %s", i, len(jobs), j.epi,
				sh.name, map[bool]string{true: "the mask epilogue only", false: "the forward's epilogues only"}[sh.masksOnly()])
		}
		j.words(&w, first, sh)
		first += j.blocks(sh)
	}
	return w, first, nil
}

// gemmLaunch uploads jobs and returns the launch that runs them all; st is
// the step state it checks for an abort, or 0 for a launch that always
// runs (inference).
func (l *learner) gemmLaunch(c *cuda.Ctx, name string, jobs []job, st cuda.DevPtr) (launch, error) {
	return l.gemmLaunchIn(c, name, jobs, st, "")
}

// gemmLaunchIn is gemmLaunch in the tile shape called shape, or in
// gemmCall's choice where shape is empty; with a module that has them,
// the choice takes in the wgmma shapes (first, so that they win a tie)
// for jobs they compute.
func (l *learner) gemmLaunchIn(c *cuda.Ctx, name string, jobs []job, st cuda.DevPtr, shape string) (launch, error) {
	tc := l.s.tc()
	sh := gemmShapeFor(l.bf16, tc, jobs)
	if l.k.wgmma && !l.s.mmaOnly && shape == "" && !slices.ContainsFunc(jobs, func(j job) bool { return !j.wgmmaFits(l.bf16) }) {
		sh = shapeAmong(append(wgmmaShapes(l.bf16), gemmShapes(l.bf16, tc)...), jobs)
	}
	if shape != "" {
		var err error
		if sh, err = gemmShapeNamed(l.bf16, tc, shape); err != nil {
			return launch{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return l.gemmLaunchShape(c, name, jobs, st, sh)
}

// gemmLaunchShape is gemmLaunch in tile shape sh.
func (l *learner) gemmLaunchShape(c *cuda.Ctx, name string, jobs []job, st cuda.DevPtr, sh gemmShape) (launch, error) {
	w, blocks, err := gemmWords(sh, l.bf16, jobs)
	if err != nil {
		return launch{}, fmt.Errorf("%s: %w", name, err)
	}
	p, err := l.mem.alloc(c, l.stream, 8*len(w))
	if err != nil {
		return launch{}, err
	}
	if err := cuda.Upload(c, p, w); err != nil {
		return launch{}, err
	}
	return launch{name: name, f: l.k.fn[sh.name], grid: dim(blocks), block: dim(sh.threads), shared: sh.shared,
		args: []any{p, int32(len(jobs)), st}}, nil
}

// acts are the activations of one forward pass over rows observations.
type acts struct {
	rows      int
	h1, h2, z cuda.DevPtr // E: rows×trunk1, rows×trunk2, rows×4·head
	o         cuda.DevPtr // float32: rows×OUTW
}

// headCols returns the first column of each head output (V, then the
// advantages of branches 0, 1, 2) in a row of the head outputs O, and the
// row width. Each starts at a multiple of 8 columns, so that every row of
// every GEMM operand cut from O or its gradient starts 16-byte aligned; the
// padding columns are never read.
func headCols(atoms int) (cols [4]int, width int) {
	for h := range cols {
		cols[h] = width
		n := atoms
		if h > 0 {
			n = market.BranchSizes[h-1] * atoms
		}
		width += align8(n)
	}
	return cols, width
}

// headCol returns the column of the head outputs where layer i (v2 or
// a2_d) starts.
func headCol(atoms, i int) int {
	cols, _ := headCols(atoms)
	for h, j := range headOut {
		if i == j {
			return cols[h]
		}
	}
	panic("headCol: not a head output layer")
}

func align8(n int) int { return (n + 7) &^ 7 }

// headLayers are the four head output layers in column order, and the
// four head hidden layers in the order of the concatenated copy.
var (
	headOut    = [4]int{model.LayerV2, model.LayerA2(0), model.LayerA2(1), model.LayerA2(2)}
	headHidden = [4]int{model.LayerV1, model.LayerA1(0), model.LayerA1(1), model.LayerA1(2)}
)

// forwardJobs returns the four gemm stages of the network net on x
// (rows×ObsDim, E) into a:
//
//	h1 = relu(x·W_s1ᵀ + b),  h2 = relu(h1·W_s2ᵀ + b),
//	z  = relu(h2·W_catᵀ + b_cat)      (v1, a1_0, a1_1, a1_2 side by side)
//	O[:, col_h] = z[:, h·head:(h+1)·head]·W_hᵀ + b_h  for the four outputs
func (l *learner) forwardJobs(net *netBufs, x cuda.DevPtr, a *acts) [4][]job {
	m, lay, e := l.m, &l.lay, int64(l.esz)
	obs, t1, t2, hd := int64(lay[model.LayerS1].In), int64(m.Trunk1), int64(m.Trunk2), int64(m.Head)
	outw := int64(l.outw)
	rows := a.rows
	var st [4][]job
	st[0] = []job{{a: mat{x, obs, 1}, b: mat{l.weight(net, model.LayerS1), 1, obs},
		ce: mat{a.h1, t1, 1}, bias: net.p + cuda.DevPtr(4*lay[model.LayerS1].B), m: rows, n: int(t1), k: int(obs), epi: epiBiasReLU}}
	st[1] = []job{{a: mat{a.h1, t1, 1}, b: mat{l.weight(net, model.LayerS2), 1, t1},
		ce: mat{a.h2, t2, 1}, bias: net.p + cuda.DevPtr(4*lay[model.LayerS2].B), m: rows, n: int(t2), k: int(t1), epi: epiBiasReLU}}
	st[2] = []job{{a: mat{a.h2, t2, 1}, b: mat{net.wcat, 1, t2},
		ce: mat{a.z, 4 * hd, 1}, bias: net.bcat, m: rows, n: int(4 * hd), k: int(t2), epi: epiBiasReLU}}
	for h, i := range headOut {
		ly := lay[i]
		col := int64(headCol(m.Atoms, i))
		st[3] = append(st[3], job{a: mat{a.z + cuda.DevPtr(e*int64(h)*hd), 4 * hd, 1},
			b: mat{l.weight(net, i), 1, hd}, c: mat{a.o + cuda.DevPtr(4*col), outw, 1},
			bias: net.p + cuda.DevPtr(4*ly.B), m: rows, n: ly.Out, k: int(hd), epi: epiBias})
	}
	return st
}

// weight is the GEMM copy of layer i's weight matrix in net.
func (l *learner) weight(net *netBufs, i int) cuda.DevPtr {
	return net.gw + cuda.DevPtr(l.esz*l.gwOff[i])
}
