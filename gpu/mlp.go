package gpu

import (
	"fmt"
	"os"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// The forward pass runs one of two ways with the same bits:
//
//   - layered (forwardJobs, every mode, the default): four grouped gemm
//     launches, each layer's activations through device memory;
//   - fused (kernels/mlp.cu, bf16 modes, DQNFLOW_FORWARD=fused): one launch
//     computes every layer of a row tile with the hidden layers in shared
//     memory, and writes the head outputs and, for the rows that need
//     them, the activations.
//
// Measured on an H200 (ADR 0018), the fused pass is the slower one at every
// batch size (113 against 35 µs at batch 256, 416 against 322 µs at 16384:
// one block of 8 warps per SM waits on its own pipeline), so it runs only
// when asked for, for the comparison that a faster version must win.
// DQNFLOW_FORWARD=fused where the network does not fit it is an error.
func forwardMode() string { return os.Getenv("DQNFLOW_FORWARD") }

// mlpPasses is MLP_PASSES of kernels/mlp.cu: s1, s2, then each head's
// hidden and output layers.
const mlpPasses = 10

// mlpJobWords is the size of struct MlpJob in 64-bit words.
const mlpJobWords = 5 + 2*mlpPasses + 4

// mlpThreads is MLP_THREADS: 8 warps per block.
const mlpThreads = 256

// mlpMaxJobs is MLP_MAXJOBS: the jobs of one launch, which the kernel
// keeps in shared memory.
const mlpMaxJobs = 4

// fusedForwardFits reports why the fused forward cannot run model m
// (nil when it can): its activation buffers hold up to 256 columns, and
// its tiles take layers in multiples of 64.
func fusedForwardFits(m config.ModelConfig) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"model.trunk1", m.Trunk1}, {"model.trunk2", m.Trunk2}, {"model.head", m.Head}} {
		if f.v%64 != 0 || f.v > 256 {
			return fmt.Errorf("%s = %d: the fused forward needs a multiple of 64 up to 256", f.name, f.v)
		}
	}
	if market.ObsDim%8 != 0 || market.ObsDim > 256 {
		return fmt.Errorf("observation width %d: the fused forward needs a multiple of 8 up to 256", market.ObsDim)
	}
	return nil
}

// useFused reports whether learners of model m in the given storage mode
// run the fused forward, or why a forward that DQNFLOW_FORWARD asks for
// cannot run.
func useFused(m config.ModelConfig, bf16 bool) (bool, error) {
	switch v := forwardMode(); v {
	case "", "layered":
		return false, nil
	case "fused":
	default:
		return false, fmt.Errorf("DQNFLOW_FORWARD %q: must be fused, layered or unset", v)
	}
	fits := fusedForwardFits(m)
	if !bf16 && fits == nil {
		fits = fmt.Errorf("precision fp32: the fused forward runs bf16 tensor-core tiles only")
	}
	if fits != nil {
		return false, fmt.Errorf("DQNFLOW_FORWARD=fused: %w", fits)
	}
	return true, nil
}

// moduleFor is the module that learners of model m use in the given
// storage mode, and whether it runs the fused forward.
func (d *gpuDevice) moduleFor(c *cuda.Ctx, m config.ModelConfig, bf16 bool) (*kernels, bool, error) {
	fused, err := useFused(m, bf16)
	if err != nil {
		return nil, false, err
	}
	k, err := d.module(c, m, bf16, fused)
	return k, fused, err
}

// newActs allocates the buffers of a forward pass over rows observations
// whose first keep rows keep their hidden activations; the layered path
// passes every row's layers through device memory, so there keep is rows.
func (l *learner) newActs(alloc func(int) cuda.DevPtr, rows, keep int) acts {
	if !l.fused {
		keep = rows
	}
	e, m := l.esz, l.m
	return acts{rows: rows, h1: alloc(e * keep * m.Trunk1), h2: alloc(e * keep * m.Trunk2), z: alloc(e * keep * 4 * m.Head), o: alloc(4 * rows * l.outw)}
}

// mlpShared is the dynamic shared memory of mlp_forward with row tiles of
// bm: the two activation buffers and the weight stages, bf16
// (mlpForward's layout).
func mlpShared(bm int, m config.ModelConfig) int {
	r64 := func(v int) int { return (v + 63) / 64 * 64 }
	sa := r64(max(m.Trunk1, m.Head)) + 8
	sb := r64(max(market.ObsDim, m.Trunk2)) + 8
	const nc, bk, stages = 128, 32, 3
	return 2 * (bm*sa + bm*sb + stages*nc*(bk+8))
}

// mlpKernels are the fused forward's kernels by row tile: 128 rows, one
// block per SM; 64 rows, two.
var mlpKernels = []struct {
	name      string
	bm, perSM int
}{{"mlp_forward128", 128, 1}, {"mlp_forward64", 64, 2}}

// fwdNet is one network's forward pass over a.rows observations at x into
// a; the first keep rows also keep their hidden activations (a.h1, a.h2,
// a.z) for the backward pass.
type fwdNet struct {
	net  *netBufs
	x    cuda.DevPtr
	a    *acts
	keep int
}

// forwardLaunches returns the launches of the forward passes nets, fused or
// layered (useFused); st is the step state the launches check for an
// abort, or 0 for launches that always run (inference).
func (l *learner) forwardLaunches(c *cuda.Ctx, name string, nets []fwdNet, st cuda.DevPtr) ([]launch, error) {
	if l.fused {
		ln, err := l.mlpLaunch(c, name, nets, st)
		return []launch{ln}, err
	}
	var stages [4][]job
	for _, f := range nets {
		js := l.forwardJobs(f.net, f.x, f.a)
		for s := range stages {
			stages[s] = append(stages[s], js[s]...)
		}
	}
	out := make([]launch, 0, len(stages))
	for s := range stages {
		shape := ""
		if s == len(stages)-1 {
			shape = headOutShape
		}
		ln, err := l.gemmLaunchIn(c, name, stages[s], st, shape)
		if err != nil {
			return nil, err
		}
		out = append(out, ln)
	}
	return out, nil
}

// headOutShape, when set (DQNFLOW_HEADOUT_SHAPE, the name of a gemm tile
// shape), fixes the tile shape of the head outputs' forward launch, for
// the benchmark that compares shapes there (tools/device/visit.sh, part
// headout); an unknown name is refused when the plan is built.
var headOutShape = os.Getenv("DQNFLOW_HEADOUT_SHAPE")

// mlpLaunch uploads the jobs of the fused forward of nets and returns its
// launch: row tiles of 128 where they give every SM at least two, else of
// 64 (DQNFLOW_MLP_BM=64|128 fixes one, for comparisons); a persistent grid
// of at most as many blocks as the device holds at once.
func (l *learner) mlpLaunch(c *cuda.Ctx, name string, nets []fwdNet, st cuda.DevPtr) (launch, error) {
	if len(nets) > mlpMaxJobs {
		return launch{}, fmt.Errorf("%s: %d forward passes in one launch, the fused forward takes at most %d", name, len(nets), mlpMaxJobs)
	}
	rows := 0
	for _, f := range nets {
		rows += f.a.rows
	}
	sms := max(l.d.info.SMs, 1)
	k := mlpKernels[1]
	if ceilDiv(rows, 128) >= 2*sms {
		k = mlpKernels[0]
	}
	switch v := os.Getenv("DQNFLOW_MLP_BM"); v {
	case "":
	case "128":
		k = mlpKernels[0]
	case "64":
		k = mlpKernels[1]
	default:
		return launch{}, fmt.Errorf("DQNFLOW_MLP_BM %q: must be 64, 128 or unset", v)
	}
	var w words
	tiles := 0
	for _, f := range nets {
		l.mlpJob(&w, f, tiles)
		tiles += ceilDiv(f.a.rows, k.bm)
	}
	p, err := l.mem.alloc(c, l.stream, 8*len(w))
	if err != nil {
		return launch{}, err
	}
	if err := cuda.Upload(c, p, w); err != nil {
		return launch{}, err
	}
	grid := min(tiles, k.perSM*sms)
	return launch{name: name, f: l.k.fn[k.name], grid: dim(max(grid, 1)), block: dim(mlpThreads), shared: mlpShared(k.bm, l.m),
		args: []any{p, int32(len(nets)), int64(tiles), st}}, nil
}

// mlpJob writes the struct MlpJob of f, its row tiles starting at first.
func (l *learner) mlpJob(w *words, f fwdNet, first int) {
	m, lay := l.m, &l.lay
	keep := min(f.keep, f.a.rows)
	act := func(p cuda.DevPtr) cuda.DevPtr {
		if keep == 0 {
			return 0
		}
		return p
	}
	w.ptr(f.x).ptr(f.a.o).ptr(act(f.a.h1)).ptr(act(f.a.h2)).ptr(act(f.a.z))
	bias := func(i int) cuda.DevPtr { return f.net.p + cuda.DevPtr(4*lay[i].B) }
	e := cuda.DevPtr(l.esz)
	var ws, bs [mlpPasses]cuda.DevPtr
	ws[0], bs[0] = l.weight(f.net, model.LayerS1), bias(model.LayerS1)
	ws[1], bs[1] = l.weight(f.net, model.LayerS2), bias(model.LayerS2)
	for h := range 4 {
		ws[2+2*h] = f.net.wcat + e*cuda.DevPtr(h*m.Head*m.Trunk2)
		bs[2+2*h] = f.net.bcat + cuda.DevPtr(4*h*m.Head)
		ws[3+2*h], bs[3+2*h] = l.weight(f.net, headOut[h]), bias(headOut[h])
	}
	for _, p := range ws {
		w.ptr(p)
	}
	for _, p := range bs {
		w.ptr(p)
	}
	w.i64(int64(f.a.rows)).i64(int64(keep)).i64(int64(first)).i64(0)
}

// ForwardPath says how the trainer's forward pass runs: "fused" (one
// mlp_forward launch per pass) or "layered" (four gemm launches), and
// after a comma the GEMM path where its products run on wgmma.
func (t *Trainer) ForwardPath() string {
	if t.l.fused {
		return "fused"
	}
	if t.l.k.wgmma {
		if !t.l.bf16 {
			return "layered, " + t.l.d.wgmma.desc + ", 3xTF32"
		}
		return "layered, " + t.l.d.wgmma.desc
	}
	return "layered"
}

// Launches says how the kernels of the trainer's CUDA graphs follow each
// other: "programmatic dependent", or "serial: " and why
// (dependentLaunches).
func (t *Trainer) Launches() string { return t.l.d.launch.desc }

// AdamRefresh says how the training graph runs AdamW and the refresh of
// the online network's copies (ADR 0028): as one launch, adamw_refresh
// (the default), or as two (DQNFLOW_ADAM_REFRESH=separate).
func (t *Trainer) AdamRefresh() string {
	if adamRefreshFused {
		return "one launch, adamw_refresh"
	}
	return "two launches, adamw then refresh: DQNFLOW_ADAM_REFRESH=separate"
}

// StepsPerGraph is how many training steps one launch of the training
// graph replays (DQNFLOW_STEPS_PER_GRAPH, default 8: ADR 0027).
func (t *Trainer) StepsPerGraph() int { return stepsPerGraph }

// SpectralSchedule says where the training graph runs the spectral step's
// power iteration (ADR 0025): on a branch of its own from the step's start
// (the default), or on the main stream before AdamW.
func (t *Trainer) SpectralSchedule() string {
	if spectralBranch {
		return "branch from the step's start"
	}
	return "main stream before AdamW: DQNFLOW_SPECTRAL_BRANCH=off"
}
