package step

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/internal/gputest"
	"github.com/dqnflow/dqnflow/gpu/kernels"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// testSetup is testTuning resolved on d, with fp32's GEMM products on
// 3xTF32 where tc and on the CUDA cores otherwise.
func testSetup(t testing.TB, d *device.Device, tc bool) device.Setup {
	t.Helper()
	tu := gputest.Tuning(t)
	tu.FP32GEMM = map[bool]string{true: "3xtf32", false: "simt"}[tc]
	s, err := d.Resolve(tu)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hostMat is an operand in host memory: rows×cols values (already rounded
// to the storage type) laid out row-contiguous or column-contiguous with a
// padded leading stride, as the trainer's buffers are.
type hostMat struct {
	rows, cols int
	colMajor   bool
	ld         int
	v          []float32
}

// newHostMat draws the rows×cols values from r in row order, whatever the
// layout, so that the same r gives the same matrix in either layout; the
// padding holds values of its own stream, never read by a right kernel.
func newHostMat(r *rand.Rand, rows, cols int, colMajor, round bool) hostMat {
	h := hostMat{rows: rows, cols: cols, colMajor: colMajor}
	inner, outer := cols, rows
	if colMajor {
		inner, outer = rows, cols
	}
	h.ld = align8(inner) + 8
	h.v = make([]float32, outer*h.ld)
	draw := func(r *rand.Rand) float32 {
		x := float32(r.NormFloat64())
		if round {
			x = bf16.Round(x)
		}
		return x
	}
	pad := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	for i := range h.v {
		h.v[i] = draw(pad)
	}
	for i := range rows {
		for j := range cols {
			h.v[h.index(i, j)] = draw(r)
		}
	}
	return h
}

func (h hostMat) index(i, j int) int {
	if h.colMajor {
		return j*h.ld + i
	}
	return i*h.ld + j
}

func (h hostMat) at(i, j int) float32 { return h.v[h.index(i, j)] }

// view is the strided view of h at device address p.
func (h hostMat) view(p cuda.DevPtr) mat {
	if h.colMajor {
		return mat{p, 1, int64(h.ld)}
	}
	return mat{p, int64(h.ld), 1}
}

// TestGEMMMatchesFloat64 runs the gemm kernel in every tile shape of every
// variant, every operand layout (A k- or m-contiguous, B k- or
// n-contiguous), ragged
// sizes, split-k and each epilogue, and compares every output with the
// float64 product of the same (storage-rounded) operands: within
// 1e-5·Σ|a·b| + 1e-30 for the float32 output, and within one rounding of
// the storage type for the E output. The mask epilogue's column sums per
// row tile are checked against the float64 sums of the reference outputs,
// within 1e-5 of the sum of their products' magnitudes.
//
// Where the device has them (useWGMMA), the wgmma shapes run the jobs they
// compute (job.wgmmaFits: both operands k-contiguous, no split, no mask)
// in the same cases. fp32 runs both of its GEMM paths (Tuning.FP32GEMM),
// the CUDA cores' and 3xTF32, whatever DQNFLOW_FP32_GEMM says. (TF32 products
// alone, 2⁻¹¹ relative each, can pass this tolerance over a long K where
// their errors cancel; the self-check's row of 1+2⁻²⁰ is what tells them
// from float32.)
func TestGEMMMatchesFloat64(t *testing.T) {
	d := gputest.Device(t)
	t.Logf("bf16 forward GEMMs: %s", testSetup(t, d, true).WGMMA.Desc)
	for _, mode := range []struct{ bf, tc bool }{{false, false}, {false, true}, {true, false}} {
		bf := mode.bf
		su := testSetup(t, d, mode.tc)
		shapes := kernels.GEMMShapes(bf, mode.tc)
		if (bf || mode.tc) && su.WGMMA.On {
			shapes = append(append(shapes, kernels.WGMMAShapes(bf)...), kernels.WGMMAMaskShapes(bf)...)
		}
		for _, sh := range shapes {
			wg := sh.IsWGMMA()
			for _, aCol := range []bool{false, true} {
				for _, bCol := range []bool{false, true} {
					for _, tc := range []struct {
						m, n, k, kchunk, epi int
					}{
						{200, 72, 56, 0, epiStore},
						{37, 130, 264, 0, epiBiasReLU},
						{129, 51, 153, 0, epiMask},
						{300, 256, 128, 0, epiMask},
						{150, 140, 1000, 128, epiStore},
						{3, 5, 7, 0, epiBias},
						{300, 204, 128, 0, epiBias}, // a head output's shape: 16-byte rows, a ragged last tile
					} {
						if wg && (aCol || bCol || tc.kchunk > 0 || (tc.epi == epiMask) != sh.MasksOnly()) {
							continue
						}
						name := fmt.Sprintf("bf16=%v/tf32x3=%v/%s/aCol=%v/bCol=%v/%dx%dx%d/split=%d/epi=%d", bf, mode.tc && !bf, sh.Name, aCol, bCol, tc.m, tc.n, tc.k, tc.kchunk, tc.epi)
						err := d.Dev.Do(func(c *cuda.Ctx) error {
							return checkGEMM(c, d, su, bf, sh, aCol, bCol, tc.m, tc.n, tc.k, tc.kchunk, tc.epi)
						})
						if err != nil {
							t.Errorf("%s: %v", name, err)
						}
					}
				}
			}
		}
	}
}

// gemmRun is one launch of checkGEMM's job and what it wrote: C (splits
// parts), the E output and the column sums (parts rows of csStride).
type gemmRun struct {
	A, Bt, mask             hostMat
	bias                    []float32
	splits, parts, csStride int
	got, gotE, gotCS        []float32
}

func checkGEMM(c *cuda.Ctx, d *device.Device, su device.Setup, bf bool, sh kernels.Shape, aCol, bCol bool, M, N, K, kchunk, epi int) error {
	g, err := runGEMM(c, d, su, bf, sh, aCol, bCol, M, N, K, kchunk, epi, 0)
	if err != nil {
		return err
	}
	return g.check(sh, M, N, K, epi)
}

// runGEMM runs the job C = A·B of M×K by K×N (A m-contiguous where aCol, B
// n-contiguous where bCol) with epilogue epi, split in k by kchunk, in tile
// shape sh, on operands drawn from a stream keyed by M, N and K, in the
// module of su; a masked job sums its columns in row tiles of csbm rows
// (0: sh.BM).
func runGEMM(c *cuda.Ctx, d *device.Device, su device.Setup, bf bool, sh kernels.Shape, aCol, bCol bool, M, N, K, kchunk, epi, csbm int) (gemmRun, error) {
	var g gemmRun
	k, err := moduleFor(c, d, config.Defaults().Model, bf, su)
	if err != nil {
		return g, err
	}
	s, err := c.NewStream()
	if err != nil {
		return g, err
	}
	defer c.DestroyStream(s)
	var mem device.Arena
	defer mem.Free(c)
	r := rand.New(rand.NewPCG(uint64(M), uint64(N*K)))
	// A is M×K: "column-major" here means m-contiguous. B is K×N stored as
	// N×K rows (k-contiguous, bCol false) or K×N rows (n-contiguous).
	A := newHostMat(r, M, K, aCol, bf)
	Bt := newHostMat(r, N, K, bCol, bf) // Bt(n, k) = B(k, n)
	mask := newHostMat(r, M, N, false, bf)
	bias := make([]float32, N)
	for i := range bias {
		bias[i] = float32(r.NormFloat64())
	}
	esz := 4
	if bf {
		esz = 2
	}
	upload := func(v []float32) (cuda.DevPtr, error) {
		p, err := mem.Alloc(c, s, esz*len(v))
		if err != nil {
			return 0, err
		}
		if bf {
			h := make([]uint16, len(v))
			for i, x := range v {
				h[i] = uint16(bf16.FromFloat32(x))
			}
			return p, cuda.Upload(c, p, h)
		}
		return p, cuda.Upload(c, p, v)
	}
	ap, err := upload(A.v)
	if err != nil {
		return g, err
	}
	bp, err := upload(Bt.v)
	if err != nil {
		return g, err
	}
	mp, err := upload(mask.v)
	if err != nil {
		return g, err
	}
	biasP, err := mem.Alloc(c, s, 4*N)
	if err != nil {
		return g, err
	}
	if err := cuda.Upload(c, biasP, bias); err != nil {
		return g, err
	}
	// B(k, n) = Bt(n, k): swap the strides of Bt's view.
	bv := Bt.view(bp)
	j := job{a: A.view(ap), b: mat{bv.p, bv.sc, bv.sr}, m: M, n: N, k: K, epi: epi, kchunk: kchunk}
	splits := j.splits()
	cp, err := mem.Alloc(c, s, 4*splits*M*N)
	if err != nil {
		return g, err
	}
	j.c = mat{cp, int64(N), 1}
	if splits > 1 {
		j.splitStride = int64(M * N)
	}
	var cep cuda.DevPtr
	switch epi {
	case epiBias:
		j.bias = biasP
	case epiBiasReLU:
		j.bias = biasP
		if cep, err = mem.Alloc(c, s, esz*M*N); err != nil {
			return g, err
		}
		j.ce = mat{cep, int64(N), 1}
	case epiMask:
		j.mask = mat{mp, int64(mask.ld), 1}
		if cep, err = mem.Alloc(c, s, esz*M*N); err != nil {
			return g, err
		}
		j.ce = mat{cep, int64(N), 1}
	}
	// The mask epilogue also sums its results by column per row tile, into
	// rows of stride N+3, filled with NaN first so that a sum left out shows.
	if csbm == 0 {
		csbm = sh.BM
	}
	parts, csStride := device.CeilDiv(M, csbm), N+3
	var csp cuda.DevPtr
	if epi == epiMask {
		if csp, err = mem.Alloc(c, s, 4*parts*csStride); err != nil {
			return g, err
		}
		if err := c.MemsetD8Async(csp, 0xff, 4*parts*csStride, s); err != nil {
			return g, err
		}
		j.colsum, j.colsumStride, j.csbm = csp, int64(csStride), csbm
	}
	w, blocks, err := gemmWords(sh, bf, []job{j})
	if err != nil {
		return g, err
	}
	jp, err := mem.Alloc(c, s, 8*len(w))
	if err != nil {
		return g, err
	}
	if err := cuda.Upload(c, jp, []uint64(w)); err != nil {
		return g, err
	}
	if err := c.Launch(k.Fn[sh.Name], device.Dim(blocks), device.Dim(sh.Threads), sh.Shared, s, jp, int32(1), cuda.DevPtr(0)); err != nil {
		return g, err
	}
	if err := c.Sync(s); err != nil {
		return g, err
	}
	got := make([]float32, splits*M*N)
	if err := cuda.Download(c, got, cp); err != nil {
		return g, err
	}
	var gotE []float32
	if cep != 0 {
		gotE = make([]float32, M*N)
		if bf {
			h := make([]uint16, M*N)
			if err := cuda.Download(c, h, cep); err != nil {
				return g, err
			}
			for i, x := range h {
				gotE[i] = bf16.BF16(x).Float32()
			}
		} else if err := cuda.Download(c, gotE, cep); err != nil {
			return g, err
		}
	}
	var gotCS []float32
	if csp != 0 {
		gotCS = make([]float32, parts*csStride)
		if err := cuda.Download(c, gotCS, csp); err != nil {
			return g, err
		}
	}
	g = gemmRun{A: A, Bt: Bt, mask: mask, bias: bias, splits: splits, parts: parts, csStride: csStride, got: got, gotE: gotE, gotCS: gotCS}
	return g, nil
}

// check compares g's outputs with the float64 product of its operands.
func (g gemmRun) check(sh kernels.Shape, M, N, K, epi int) error {
	A, Bt, mask, bias, splits, parts, csStride := g.A, g.Bt, g.mask, g.bias, g.splits, g.parts, g.csStride
	got, gotE, gotCS := g.got, g.gotE, g.gotCS
	// wantCS and magCS are the float64 column sums of the reference outputs
	// per row tile, and of their magnitudes.
	wantCS, magCS := make([]float64, parts*N), make([]float64, parts*N)
	bad := 0
	var first error
	for m := range M {
		for n := range N {
			var want, mag float64
			for kk := range K {
				p := float64(A.at(m, kk)) * float64(Bt.at(n, kk))
				want += p
				mag += math.Abs(p)
			}
			var v float64
			for sp := range splits {
				v += float64(got[sp*M*N+m*N+n])
			}
			ref := want
			switch epi {
			case epiBias:
				ref = want + float64(bias[n])
			case epiBiasReLU:
				ref = math.Max(want+float64(bias[n]), 0)
				mag += math.Abs(float64(bias[n]))
			case epiMask:
				if mask.at(m, n) <= 0 {
					ref = 0
				}
				wantCS[(m/sh.BM)*N+n] += ref
				if ref != 0 {
					magCS[(m/sh.BM)*N+n] += mag
				}
			}
			tol := 1e-5*mag + 1e-30
			if epi == epiBiasReLU {
				// Only the E output is written in this test.
				v = float64(gotE[m*N+n])
				tol += math.Abs(ref) / 128
			}
			if math.Abs(v-ref) > tol {
				bad++
				if first == nil {
					first = fmt.Errorf("C(%d, %d) = %g, want %g (tolerance %g)", m, n, v, ref, tol)
				}
			}
			if epi == epiMask {
				if e := float64(gotE[m*N+n]); math.Abs(e-ref) > tol+math.Abs(ref)/128 {
					bad++
					if first == nil {
						first = fmt.Errorf("Ce(%d, %d) = %g, want %g", m, n, e, ref)
					}
				}
			}
		}
	}
	if gotCS != nil {
		nb, err := checkColSums(gotCS, wantCS, magCS, parts, N, csStride)
		bad += nb
		if first == nil {
			first = err
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d outputs wrong; first: %w", bad, M*N, first)
	}
	return nil
}

// TestWGMMAInputGradientsMatchMMA: a masked job with column sums, as the
// backward's input gradients are, gives the same bits on the wgmma kernels
// (B k-contiguous: the transposed weight copy; the sums in the order of
// the mma.sync tile named by csbm) as on that mma.sync tile with B
// n-contiguous (the weights as stored), in bf16 and in fp32 (3xTF32):
// the C and E outputs and every column sum. Shapes with one k tile do not
// run on wgmma (job.wgmmaFits) and are left out.
func TestWGMMAInputGradientsMatchMMA(t *testing.T) {
	d := gputest.Device(t)
	su := testSetup(t, d, true)
	if !su.WGMMA.On {
		t.Skipf("no wgmma on this device: %s", su.WGMMA.Desc)
	}
	for _, bf := range []bool{true, false} {
		tile := map[bool]int{true: 64, false: 32}[bf]
		for _, ref := range kernels.GEMMShapes(bf, true) {
			for _, sh := range kernels.WGMMAMaskShapes(bf) {
				for _, tc := range []struct{ m, n, k int }{{300, 256, 128}, {129, 128, 153}, {1000, 128, 512}, {200, 72, 51}, {64, 136, 96}} {
					if tc.k <= tile {
						continue
					}
					name := fmt.Sprintf("bf16=%v/%s against %s/%dx%dx%d", bf, sh.Name, ref.Name, tc.m, tc.n, tc.k)
					err := d.Dev.Do(func(c *cuda.Ctx) error {
						want, err := runGEMM(c, d, su, bf, ref, false, true, tc.m, tc.n, tc.k, 0, epiMask, 0)
						if err != nil {
							return fmt.Errorf("mma.sync: %w", err)
						}
						got, err := runGEMM(c, d, su, bf, sh, false, false, tc.m, tc.n, tc.k, 0, epiMask, ref.BM)
						if err != nil {
							return fmt.Errorf("wgmma: %w", err)
						}
						for _, o := range []struct {
							what      string
							got, want []float32
						}{{"C", got.got, want.got}, {"Ce", got.gotE, want.gotE}, {"colsum", got.gotCS, want.gotCS}} {
							if len(o.got) != len(o.want) {
								return fmt.Errorf("%s: %d values against %d", o.what, len(o.got), len(o.want))
							}
							differ, first := 0, -1
							for i := range o.want {
								if math.Float32bits(o.got[i]) != math.Float32bits(o.want[i]) {
									differ++
									if first < 0 {
										first = i
									}
								}
							}
							if differ > 0 {
								return fmt.Errorf("%s: %d of %d values differ; first at %d: %g against %g", o.what, differ, len(o.want), first, o.got[first], o.want[first])
							}
						}
						return nil
					})
					if err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
			}
		}
	}
}

// TestTransposedWeightsAreWhereTheInputGradientsReadThem: in the default
// network, where the refresh kernel writes each weight's transposed copy
// (element (o, i) at tdst + i·ld + o, kernels/optim.cu) is where the wgmma
// input gradient reads it (weightT's B view: B(o, i) at off + o + i·ld;
// stage 2 reads the four head-hidden layers as one wcatᵀ from v1's view);
// no two elements share a place, none lands on the untransposed copies,
// and every matrix and row starts 16-byte aligned. Without transposes
// there are none. (No GPU: the layout is the host's.)
func TestTransposedWeightsAreWhereTheInputGradientsReadThem(t *testing.T) {
	m := config.Defaults().Model
	for _, bf := range []bool{true, false} {
		l := &Learner{M: m, Lay: model.Layers(m), ESize: 4}
		if bf {
			l.ESize = 2
		}
		l.Online.gw = 1 << 20
		l.layoutCopies(true)
		owner := map[int]string{}
		for i, ly := range l.Lay {
			tr := l.gwT[i]
			if tr.off < 0 {
				continue
			}
			if tr.off < l.gwLen || (tr.off*l.ESize)%16 != 0 || (tr.ld*l.ESize)%16 != 0 || tr.ld < ly.Out {
				t.Fatalf("bf16=%v layer %d: transposed at %d, ld %d (copies end at %d, %d outputs)", bf, i, tr.off, tr.ld, l.gwLen, ly.Out)
			}
			view := l.weightT(i)
			if i == model.LayerA1(0) || i == model.LayerA1(1) || i == model.LayerA1(2) {
				view = l.weightT(model.LayerV1) // stage 2's wcatᵀ
				h := map[int]int{model.LayerA1(0): 1, model.LayerA1(1): 2, model.LayerA1(2): 3}[i]
				view.p += cuda.DevPtr(l.ESize * h * m.Head)
			}
			if view.p == 0 || view.sr != 1 {
				t.Fatalf("bf16=%v layer %d: view %+v; want a k-contiguous copy", bf, i, view)
			}
			for o := range ly.Out {
				for in := range ly.In {
					e := o*ly.In + in
					at := tr.off + (e%ly.In)*tr.ld + e/ly.In // the refresh kernel's place
					read := (int(view.p)-int(l.Online.gw))/l.ESize + o*int(view.sr) + in*int(view.sc)
					if at != read {
						t.Fatalf("bf16=%v layer %d (%d, %d): written at %d, read at %d", bf, i, o, in, at, read)
					}
					if at >= l.gwLen+l.gwTLen {
						t.Fatalf("bf16=%v layer %d (%d, %d): at %d, past the copy's %d elements", bf, i, o, in, at, l.gwLen+l.gwTLen)
					}
					if prev, dup := owner[at]; dup {
						t.Fatalf("bf16=%v layer %d (%d, %d): place %d already holds %s", bf, i, o, in, at, prev)
					}
					owner[at] = fmt.Sprintf("layer %d (%d, %d)", i, o, in)
				}
			}
		}
		if countTransposed(l) != 9 {
			t.Errorf("bf16=%v: %d layers transposed, want s2, the four head-hidden and the four head outputs", bf, countTransposed(l))
		}
		l.layoutCopies(false)
		if countTransposed(l) != 0 || l.gwTLen != 0 {
			t.Errorf("bf16=%v: without transposes, %d layers transposed in %d elements", bf, countTransposed(l), l.gwTLen)
		}
	}
}

func countTransposed(l *Learner) int {
	n := 0
	for _, tr := range l.gwT {
		if tr.off >= 0 {
			n++
		}
	}
	return n
}

// TestInputGradientsFitWGMMAOnlyInAnMMATilesOrder: a masked job with
// column sums runs on the wgmma shapes only where it names the mma.sync
// row tile whose order its sums keep (64 or 128 rows), and gemmWords
// refuses a job whose row tile is not its launch shape's (no GPU).
func TestInputGradientsFitWGMMAOnlyInAnMMATilesOrder(t *testing.T) {
	j := job{a: mat{0x1000, 512, 1}, b: mat{0x2000, 1, 512}, c: mat{0x3000, 256, 1}, mask: mat{0x4000, 256, 1},
		m: 4096, n: 256, k: 512, epi: epiMask, colsum: 0x5000, colsumStride: 256}
	for csbm, fits := range map[int]bool{0: false, 32: false, 64: true, 96: false, 128: true, 256: false} {
		j.csbm = csbm
		if got := j.wgmmaFits(true); got != fits {
			t.Errorf("csbm %d: wgmmaFits %v, want %v", csbm, got, fits)
		}
	}
	wg, fwd := kernels.WGMMAMaskShapes(true)[0], kernels.WGMMAShapes(true)[0]
	mma, err := kernels.ShapeNamed(true, true, "gemm128o")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sh   kernels.Shape
		csbm int
		ok   bool
	}{{wg, 64, true}, {wg, 128, true}, {wg, 0, false}, {wg, 96, false}, {mma, 0, true}, {mma, 128, true}, {mma, 64, false}, {fwd, 128, false}} {
		j.csbm = c.csbm
		if _, _, err := gemmWords(c.sh, true, []job{j}); (err == nil) != c.ok {
			t.Errorf("%s with csbm %d: error %v, want ok %v", c.sh.Name, c.csbm, err, c.ok)
		}
	}
}

// TestFillMovesTheInputGradientsWhereTheyFillTheGPU: with the default
// network's second backward stage (four weight gradients split in k, and
// the input gradient G3·W_cat, K = 512, N = 256), "fill" moves the input
// gradient to the wgmma mask kernels at batch 16384 (512 blocks of
// wgmma128x64m) but not at 4096 (128), "on" at both, "off" at neither;
// a moved job reads the transposed copy and keeps the stage's mma.sync
// row tiles, and the weight gradients stay (ADR 0023; no GPU).
func TestFillMovesTheInputGradientsWhereTheyFillTheGPU(t *testing.T) {
	const p = cuda.DevPtr(0x10000)
	stage := func(n int) []job {
		var js []job
		for range 4 {
			js = append(js, job{a: mat{p, 1, 512}, b: mat{p, 256, 1}, c: mat{p, 256, 1}, m: 128, n: 256, k: n, epi: epiStore, kchunk: 512, splitStride: 128 * 256})
		}
		return append(js, job{a: mat{p, 512, 1}, b: mat{p, 256, 1}, bT: mat{p, 1, 512}, c: mat{p, 256, 1}, mask: mat{p, 256, 1},
			m: n, n: 256, k: 512, epi: epiMask, colsum: p, colsumStride: 256})
	}
	for _, bf := range []bool{true, false} {
		for _, c := range []struct {
			mode  string
			n     int
			moved bool
		}{{"fill", 4096, false}, {"fill", 16384, true}, {"on", 4096, true}, {"on", 16384, true}, {"off", 16384, false}} {
			js := stage(c.n)
			sp := splitStage(bf, true, c.mode, js)
			name := fmt.Sprintf("bf16=%v %s batch %d", bf, c.mode, c.n)
			if want := gemmShapeFor(bf, true, js); sp.ref != want {
				t.Errorf("%s: reference shape %s, want the whole stage's %s", name, sp.ref.Name, want.Name)
			}
			if !c.moved {
				if len(sp.moved) != 0 || len(sp.rest) != 5 {
					t.Errorf("%s: %d moved, %d left; want none moved", name, len(sp.moved), len(sp.rest))
				}
				continue
			}
			if len(sp.moved) != 1 || len(sp.rest) != 4 || sp.rest[0].epi != epiStore {
				t.Fatalf("%s: %d moved, %d left; want the input gradient moved and the four weight gradients left", name, len(sp.moved), len(sp.rest))
			}
			m := sp.moved[0]
			if m.b != js[4].bT || m.csbm != sp.ref.BM || !sp.shape.MasksOnly() {
				t.Errorf("%s: moved job reads %+v with row tiles of %d on %s; want %+v, %d, a mask kernel", name, m.b, m.csbm, sp.shape.Name, js[4].bT, sp.ref.BM)
			}
			if _, _, err := gemmWords(sp.shape, bf, sp.moved); err != nil {
				t.Errorf("%s: the moved launch: %v", name, err)
			}
			if c.n == 16384 && sp.shape.Name != "wgmma128x64m" {
				t.Errorf("%s: shape %s, want wgmma128x64m (wgmma128m's 256 blocks do not fill the GPU)", name, sp.shape.Name)
			}
		}
	}
}

// TestFP32GEMMPathIsNamed: the self-check's line names the fp32 GEMM path.
func TestFP32GEMMPathIsNamed(t *testing.T) {
	if p := fp32GEMMPath(true); !strings.Contains(p, "3xTF32") {
		t.Errorf("fp32GEMMPath(true) = %q, want it to name 3xTF32", p)
	}
	if p := fp32GEMMPath(false); !strings.Contains(p, "CUDA cores") {
		t.Errorf("fp32GEMMPath(false) = %q, want it to name the CUDA cores", p)
	}
}

// TestTF32ShapesFitTheSM: the 3xTF32 kernels' shared memory is what
// kernels/gemm.cu stages (three k tiles of 32 floats of A and B in their
// padded layouts), fits one block's limit on Hopper (227 KiB), and lets
// two square blocks share an SM (228 KiB less 1 KiB a block), as
// gemm128o's launch bounds ask.
func TestTF32ShapesFitTheSM(t *testing.T) {
	want := map[string]int{"gemm64": 55296, "gemm128o": 110592, "gemm128x64o": 82944}
	for _, sh := range kernels.GEMMShapes(false, true) {
		if sh.Shared != want[sh.Name] {
			t.Errorf("%s: %d bytes of shared memory, want %d", sh.Name, sh.Shared, want[sh.Name])
		}
		if sh.Shared > 227<<10 {
			t.Errorf("%s: %d bytes exceed a block's 227 KiB", sh.Name, sh.Shared)
		}
		if sh.BM == 128 && sh.BN == 128 && 2*(sh.Shared+1<<10) > 228<<10 {
			t.Errorf("%s: two blocks of %d bytes do not fit an SM", sh.Name, sh.Shared)
		}
	}
	for _, sh := range kernels.GEMMShapes(false, false) {
		if sh.Shared != 0 || sh.Threads != 256 {
			t.Errorf("CUDA-core %s: %d threads, %d bytes of dynamic shared memory; want 256 and 0", sh.Name, sh.Threads, sh.Shared)
		}
	}
}

// TestWGMMAShapesFitTheSM pins the dynamic shared memory of every wgmma
// shape (kernels/gemm.cu gemmWgmma) and checks the blocks an SM each was
// written for: bf16's two or three, fp32's two of either tile. The mask
// kernels take the same, which also holds wgColSums's 128 rows of BN + 8
// floats.
func TestWGMMAShapesFitTheSM(t *testing.T) {
	want := map[string]struct{ shared, perSM int }{
		"bf16 wgmma128": {99328, 2}, "bf16 wgmma128x64": {74752, 3},
		"fp32 wgmma128": {99328, 2}, "fp32 wgmma128x64": {99328, 2},
		"bf16 wgmma128m": {99328, 2}, "bf16 wgmma128x64m": {74752, 3},
		"fp32 wgmma128m": {99328, 2}, "fp32 wgmma128x64m": {99328, 2},
	}
	seen := 0
	for _, bf := range []bool{true, false} {
		mode := map[bool]string{true: "bf16", false: "fp32"}[bf]
		for _, sh := range append(kernels.WGMMAShapes(bf), kernels.WGMMAMaskShapes(bf)...) {
			name := mode + " " + sh.Name
			w, ok := want[name]
			if !ok {
				t.Errorf("%s: no pinned size", name)
				continue
			}
			seen++
			if sh.Shared != w.shared {
				t.Errorf("%s: %d bytes of shared memory, want %d", name, sh.Shared, w.shared)
			}
			if w.perSM*(sh.Shared+1<<10) > 228<<10 {
				t.Errorf("%s: %d blocks of %d bytes do not fit an SM", name, w.perSM, sh.Shared)
			}
			if ys := 4 * 128 * (sh.BN + 8); sh.MasksOnly() && ys > sh.Shared {
				t.Errorf("%s: wgColSums's %d bytes exceed the block's %d", name, ys, sh.Shared)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d wgmma shapes, want %d", seen, len(want))
	}
}

// checkColSums compares the column sums got (parts rows of stride
// columns) with the float64 sums want: within 1e-5 of mag, the sums of
// their products' magnitudes, for the job's n columns, and NaN (never
// written) beyond them. It returns how many are wrong and the first.
func checkColSums(got []float32, want, mag []float64, parts, n, stride int) (int, error) {
	bad := 0
	var first error
	fail := func(err error) {
		bad++
		if first == nil {
			first = err
		}
	}
	for pt := range parts {
		for c := range stride {
			v := float64(got[pt*stride+c])
			if c >= n {
				if !math.IsNaN(v) {
					fail(fmt.Errorf("colsum(%d, %d) beyond the job's %d columns written: %g", pt, c, n, v))
				}
				continue
			}
			w, tol := want[pt*n+c], 1e-5*mag[pt*n+c]+1e-30
			if math.IsNaN(v) || math.Abs(v-w) > tol {
				fail(fmt.Errorf("colsum(%d, %d) = %g, want %g (tolerance %g)", pt, c, v, w, tol))
			}
		}
	}
	return bad, first
}

// TestColSumCheckCatchesWrongMissingAndStraySums: the check of the GEMM
// test's column sums fails a sum off by more than its tolerance, one never
// written (NaN) and one written beyond the job's columns, and passes the
// rest (it runs without a GPU).
func TestColSumCheckCatchesWrongMissingAndStraySums(t *testing.T) {
	nan := float32(math.NaN())
	want, mag := []float64{1, 2, 3, 4}, []float64{1, 1, 1, 1} // 2 parts × 2 columns
	good := []float32{1, 2, nan, 3, 4, nan}                   // stride 3
	if bad, err := checkColSums(good, want, mag, 2, 2, 3); bad != 0 {
		t.Fatalf("right sums: %d wrong (%v)", bad, err)
	}
	for name, got := range map[string][]float32{
		"off":     {1, 2.001, nan, 3, 4, nan},
		"missing": {1, 2, nan, nan, 4, nan},
		"stray":   {1, 2, 0, 3, 4, nan},
	} {
		if bad, err := checkColSums(got, want, mag, 2, 2, 3); bad != 1 || err == nil {
			t.Errorf("%s: %d wrong (%v), want 1", name, bad, err)
		}
	}
}
