package step

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/kernels"
	"slices"

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
func colsumParts(m int, sh kernels.Shape) int { return device.CeilDiv(m, sh.BM) }

// fp32GEMMPath describes where fp32 modules' GEMM products run, for the
// precision self-check's line.
func fp32GEMMPath(tc bool) string {
	if tc {
		return "products 3xTF32 on the tensor cores"
	}
	return "products fmaf on the CUDA cores: gpu tuning fp32_gemm = simt (DQNFLOW_FP32_GEMM)"
}

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
	return device.CeilDiv(j.k, j.kchunk)
}

func (j job) blocks(sh kernels.Shape) int {
	return device.CeilDiv(j.m, sh.BM) * device.CeilDiv(j.n, sh.BN) * j.splits()
}

// padded is the work of j in whole tiles of sh: what the launch computes,
// useful or not.
func (j job) padded(sh kernels.Shape) int64 {
	return int64(device.CeilDiv(j.m, sh.BM)*sh.BM) * int64(device.CeilDiv(j.n, sh.BN)*sh.BN) * int64(j.k)
}

// words writes j as the 28 words of struct GemmJob, its blocks starting at
// first in tiles of shape sh.
func (j job) words(w *device.Words, first int, sh kernels.Shape) {
	csbm := j.csbm
	if csbm == 0 {
		csbm = sh.BM
	}
	kchunk := j.k
	if j.splits() > 1 {
		kchunk = j.kchunk
	}
	w.Ptr(j.a.p).I64(j.a.sr).I64(j.a.sc)
	w.Ptr(j.b.p).I64(j.b.sr).I64(j.b.sc)
	w.Ptr(j.c.p).I64(j.c.sr).I64(j.c.sc)
	w.Ptr(j.ce.p).I64(j.ce.sr).I64(j.ce.sc)
	w.Ptr(j.mask.p).I64(j.mask.sr).I64(j.mask.sc)
	w.Ptr(j.bias)
	w.I64(int64(j.m)).I64(int64(j.n)).I64(int64(j.k)).I64(int64(j.epi))
	w.I64(int64(first)).I64(int64(device.CeilDiv(j.m, sh.BM))).I64(int64(device.CeilDiv(j.n, sh.BN)))
	w.I64(int64(kchunk)).I64(j.splitStride)
	w.Ptr(j.colsum).I64(j.colsumStride).I64(int64(csbm))
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
func gemmCall(bf16, tc bool, jobs []job) (kernels.Shape, device.Words, int, error) {
	best := gemmShapeFor(bf16, tc, jobs)
	w, blocks, err := gemmWords(best, bf16, jobs)
	return best, w, blocks, err
}

// gemmShapeFor is gemmCall's choice of tile shape for jobs.
func gemmShapeFor(bf16, tc bool, jobs []job) kernels.Shape {
	return shapeAmong(kernels.GEMMShapes(bf16, tc), jobs)
}

// shapeAmong is gemmCall's choice for jobs among shapes; on equal padding
// and blocks the first listed wins.
func shapeAmong(shapes []kernels.Shape, jobs []job) kernels.Shape {
	var best kernels.Shape
	bestFill, bestBlocks, bestPad := false, 0, int64(0)
	for _, sh := range shapes {
		blocks, pad := 0, int64(0)
		for _, j := range jobs {
			blocks += j.blocks(sh)
			pad += j.padded(sh)
		}
		fill := blocks >= fillBlocks
		better := best.Name == "" ||
			(fill && !bestFill) ||
			(fill && bestFill && (pad < bestPad || pad == bestPad && blocks < bestBlocks)) ||
			(!fill && !bestFill && blocks > bestBlocks)
		if better {
			best, bestFill, bestBlocks, bestPad = sh, fill, blocks, pad
		}
	}
	return best
}

// gemmWords checks jobs and returns their words for tile shape sh and the
// number of blocks of the launch.
func gemmWords(sh kernels.Shape, bf16 bool, jobs []job) (device.Words, int, error) {
	esz := 4
	if bf16 {
		esz = 2
	}
	var w device.Words
	first := 0
	wg := sh.IsWGMMA()
	for i, j := range jobs {
		if err := j.check(esz); err != nil {
			return nil, 0, fmt.Errorf("gemm job %d of %d: %w", i, len(jobs), err)
		}
		if j.colsum != 0 && (wg && j.csbm != 64 && j.csbm != 128 || !wg && j.csbm != 0 && j.csbm != sh.BM) {
			return nil, 0, fmt.Errorf("gemm job %d of %d: column sums in row tiles of %d on %s", i, len(jobs), j.csbm, sh.Name)
		}
		if wg && (j.epi == epiMask) != sh.MasksOnly() {
			return nil, 0, fmt.Errorf("gemm job %d of %d: epilogue %d on %s, which computes %s", i, len(jobs), j.epi,
				sh.Name, map[bool]string{true: "the mask epilogue only", false: "the forward's epilogues only"}[sh.MasksOnly()])
		}
		j.words(&w, first, sh)
		first += j.blocks(sh)
	}
	return w, first, nil
}

// gemmLaunch uploads jobs and returns the launch that runs them all; st is
// the step state it checks for an abort, or 0 for a launch that always
// runs (inference).
func (l *Learner) gemmLaunch(c *cuda.Ctx, name string, jobs []job, st cuda.DevPtr) (device.Launch, error) {
	return l.gemmLaunchIn(c, name, jobs, st, "")
}

// gemmLaunchIn is gemmLaunch in the tile shape called shape, or in
// gemmCall's choice where shape is empty; with a module that has them,
// the choice takes in the wgmma shapes (first, so that they win a tie)
// for jobs they compute.
func (l *Learner) gemmLaunchIn(c *cuda.Ctx, name string, jobs []job, st cuda.DevPtr, shape string) (device.Launch, error) {
	tc := l.S.TC()
	sh := gemmShapeFor(l.BF16, tc, jobs)
	if l.K.WGMMA && !l.S.MmaOnly && shape == "" && !slices.ContainsFunc(jobs, func(j job) bool { return !j.wgmmaFits(l.BF16) }) {
		sh = shapeAmong(append(kernels.WGMMAShapes(l.BF16), kernels.GEMMShapes(l.BF16, tc)...), jobs)
	}
	if shape != "" {
		var err error
		if sh, err = kernels.ShapeNamed(l.BF16, tc, shape); err != nil {
			return device.Launch{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return l.gemmLaunchShape(c, name, jobs, st, sh)
}

// gemmLaunchShape is gemmLaunch in tile shape sh.
func (l *Learner) gemmLaunchShape(c *cuda.Ctx, name string, jobs []job, st cuda.DevPtr, sh kernels.Shape) (device.Launch, error) {
	w, blocks, err := gemmWords(sh, l.BF16, jobs)
	if err != nil {
		return device.Launch{}, fmt.Errorf("%s: %w", name, err)
	}
	p, err := l.Mem.Alloc(c, l.Stream, 8*len(w))
	if err != nil {
		return device.Launch{}, err
	}
	if err := cuda.Upload(c, p, w); err != nil {
		return device.Launch{}, err
	}
	return device.Launch{Name: name, F: l.K.Fn[sh.Name], Grid: device.Dim(blocks), Block: device.Dim(sh.Threads), Shared: sh.Shared,
		Args: []any{p, int32(len(jobs)), st}}, nil
}

// Acts are the activations of one forward pass over rows observations.
type Acts struct {
	Rows      int
	h1, h2, z cuda.DevPtr // E: rows×trunk1, rows×trunk2, rows×4·head
	O         cuda.DevPtr // float32: rows×OUTW
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
	for h, j := range HeadOut {
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
	HeadOut    = [4]int{model.LayerV2, model.LayerA2(0), model.LayerA2(1), model.LayerA2(2)}
	headHidden = [4]int{model.LayerV1, model.LayerA1(0), model.LayerA1(1), model.LayerA1(2)}
)

// forwardJobs returns the four gemm stages of the network net on x
// (rows×ObsDim, E) into a:
//
//	h1 = relu(x·W_s1ᵀ + b),  h2 = relu(h1·W_s2ᵀ + b),
//	z  = relu(h2·W_catᵀ + b_cat)      (v1, a1_0, a1_1, a1_2 side by side)
//	O[:, col_h] = z[:, h·head:(h+1)·head]·W_hᵀ + b_h  for the four outputs
func (l *Learner) forwardJobs(net *netBufs, x cuda.DevPtr, a *Acts) [4][]job {
	m, lay, e := l.M, &l.Lay, int64(l.ESize)
	obs, t1, t2, hd := int64(lay[model.LayerS1].In), int64(m.Trunk1), int64(m.Trunk2), int64(m.Head)
	outw := int64(l.OutW)
	rows := a.Rows
	var st [4][]job
	st[0] = []job{{a: mat{x, obs, 1}, b: mat{l.weight(net, model.LayerS1), 1, obs},
		ce: mat{a.h1, t1, 1}, bias: net.p + cuda.DevPtr(4*lay[model.LayerS1].B), m: rows, n: int(t1), k: int(obs), epi: epiBiasReLU}}
	st[1] = []job{{a: mat{a.h1, t1, 1}, b: mat{l.weight(net, model.LayerS2), 1, t1},
		ce: mat{a.h2, t2, 1}, bias: net.p + cuda.DevPtr(4*lay[model.LayerS2].B), m: rows, n: int(t2), k: int(t1), epi: epiBiasReLU}}
	st[2] = []job{{a: mat{a.h2, t2, 1}, b: mat{net.wcat, 1, t2},
		ce: mat{a.z, 4 * hd, 1}, bias: net.bcat, m: rows, n: int(4 * hd), k: int(t2), epi: epiBiasReLU}}
	for h, i := range HeadOut {
		ly := lay[i]
		col := int64(headCol(m.Atoms, i))
		st[3] = append(st[3], job{a: mat{a.z + cuda.DevPtr(e*int64(h)*hd), 4 * hd, 1},
			b: mat{l.weight(net, i), 1, hd}, c: mat{a.O + cuda.DevPtr(4*col), outw, 1},
			bias: net.p + cuda.DevPtr(4*ly.B), m: rows, n: ly.Out, k: int(hd), epi: epiBias})
	}
	return st
}

// weight is the GEMM copy of layer i's weight matrix in net.
func (l *Learner) weight(net *netBufs, i int) cuda.DevPtr {
	return net.gw + cuda.DevPtr(l.ESize*l.gwOff[i])
}
