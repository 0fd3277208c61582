package gpu

import (
	"github.com/dqnflow/dqnflow/gpu/cuda"
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

// job is one product of a grouped gemm launch (struct GemmJob).
type job struct {
	a, b    mat
	c, ce   mat // float32 output, E output (either may be zero)
	mask    mat
	bias    cuda.DevPtr
	m, n, k int
	epi     int
}

func (j job) words(w *words) {
	w.ptr(j.a.p).i64(j.a.sr).i64(j.a.sc)
	w.ptr(j.b.p).i64(j.b.sr).i64(j.b.sc)
	w.ptr(j.c.p).i64(j.c.sr).i64(j.c.sc)
	w.ptr(j.ce.p).i64(j.ce.sr).i64(j.ce.sc)
	w.ptr(j.mask.p).i64(j.mask.sr).i64(j.mask.sc)
	w.ptr(j.bias)
	w.i64(int64(j.m)).i64(int64(j.n)).i64(int64(j.k)).i64(int64(j.epi))
}

// gemmLaunch uploads jobs and returns the launch that runs them all.
func (l *learner) gemmLaunch(c *cuda.Ctx, name string, jobs []job) (launch, error) {
	var w words
	mm, nn := 0, 0
	for _, j := range jobs {
		j.words(&w)
		mm, nn = max(mm, j.m), max(nn, j.n)
	}
	p, err := l.mem.alloc(c, l.stream, 8*len(w))
	if err != nil {
		return launch{}, err
	}
	if err := cuda.Upload(c, p, w); err != nil {
		return launch{}, err
	}
	threads := 256
	if l.bf16 {
		threads = 128
	}
	return launch{name: name, f: l.k.fn["gemm"], grid: dim3(ceilDiv(nn, 64), ceilDiv(mm, 64), len(jobs)), block: dim(threads),
		args: []any{p, l.st}}, nil
}

// acts are the activations of one forward pass over rows observations.
type acts struct {
	rows      int
	h1, h2, z cuda.DevPtr // E: rows×trunk1, rows×trunk2, rows×4·head
	o         cuda.DevPtr // float32: rows×OUTW
}

// headCol returns the column of the head outputs where layer i (v2 or
// a2_d) starts: V at 0, then the advantages action after action.
func headCol(atoms, i int) int {
	if i == model.LayerV2 {
		return 0
	}
	for d := range model.NumBranches {
		if i == model.LayerA2(d) {
			return atoms + model.BranchOffset[d]*atoms
		}
	}
	panic("headCol: not a head output layer")
}

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
	st[0] = []job{{a: mat{x, obs, 1}, b: mat{net.gw + cuda.DevPtr(e*int64(lay[model.LayerS1].W)), 1, obs},
		ce: mat{a.h1, t1, 1}, bias: net.p + cuda.DevPtr(4*lay[model.LayerS1].B), m: rows, n: int(t1), k: int(obs), epi: epiBiasReLU}}
	st[1] = []job{{a: mat{a.h1, t1, 1}, b: mat{net.gw + cuda.DevPtr(e*int64(lay[model.LayerS2].W)), 1, t1},
		ce: mat{a.h2, t2, 1}, bias: net.p + cuda.DevPtr(4*lay[model.LayerS2].B), m: rows, n: int(t2), k: int(t1), epi: epiBiasReLU}}
	st[2] = []job{{a: mat{a.h2, t2, 1}, b: mat{net.wcat, 1, t2},
		ce: mat{a.z, 4 * hd, 1}, bias: net.bcat, m: rows, n: int(4 * hd), k: int(t2), epi: epiBiasReLU}}
	for h, i := range headOut {
		ly := lay[i]
		col := int64(headCol(m.Atoms, i))
		st[3] = append(st[3], job{a: mat{a.z + cuda.DevPtr(e*int64(h)*hd), 4 * hd, 1},
			b: mat{net.gw + cuda.DevPtr(e*int64(ly.W)), 1, hd}, c: mat{a.o + cuda.DevPtr(4*col), outw, 1},
			bias: net.p + cuda.DevPtr(4*ly.B), m: rows, n: ly.Out, k: int(hd), epi: epiBias})
	}
	return st
}
