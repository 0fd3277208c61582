package step

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/kernels"
	"slices"

	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// stepPlan holds the buffers and the launches of one training step at
// batch size n, resolved once; the training path captures them as a CUDA
// graph and replays it.
type stepPlan struct {
	N int

	X                       cuda.DevPtr // E [2n×ObsDim]: s then s′
	on, tg                  Acts        // online over 2n rows, target over n rows (x's s′ half)
	g, ge, g3, g3e, g2, g2e cuda.DevPtr // upstream gradients: float32 and E copies
	g1, g1e                 cuda.DevPtr
	Act, ret, disc, w       cuda.DevPtr
	idx, mass, sample, tgts cuda.DevPtr
	SampleArgs              cuda.DevPtr // struct SampleArgs (key at word sampleKeyWord)
	lossSampled, lossGiven  device.Launch
	sampleL                 device.Launch
	prioL                   []device.Launch // prio_claim, prio_set, then the tree's inner nodes
	Fwd                     []device.Launch // the forward passes (forward.go)
	Bwd                     []device.Launch // backward stages 1 to 4 (backwardLaunches)
	reduceL, normL          device.Launch
	adamL, specL            device.Launch
	adamRefreshL            device.Launch  // adamw_refresh: AdamW and the online refresh in one launch (ADR 0028)
	graph                   cuda.GraphExec // one training step
	graphK                  cuda.GraphExec // Tuning.StepsPerGraph steps, when more than one
}

// lossSamplesPerBlock is LOSS_SPB of kernels/head.cu (passed by
// kernelOptions): samples per block of c51_loss, three warps each (1, 4
// and 8 were measured no faster: docs/perf/gpu-2026-12-02.md).
const lossSamplesPerBlock = 2

// reduceRunCols is RUN_COLS of kernels/optim.cu (passed by
// kernelOptions): the columns a grad_reduce block adds at a time in a
// kind-0 segment.
const reduceRunCols = 8

// lossShared is the static shared memory of a c51_loss block, struct
// LossShared of kernels/head.cu, for a model with the given atoms.
func lossShared(atoms int) int {
	_, outw := headCols(atoms)
	warps := 3 * lossSamplesPerBlock
	return 4 * (7*warps*atoms + warps + lossSamplesPerBlock + lossSamplesPerBlock*outw)
}

// maxLossAtoms is the most atoms whose c51_loss block fits the 48 KiB of
// static shared memory a kernel may declare.
func maxLossAtoms() int {
	a := 2
	for lossShared(a+1) <= 48<<10 {
		a++
	}
	return a
}

// lossRows returns the rows per c51_loss block at batch n: the fewest
// multiples of lossSamplesPerBlock that keep the blocks within lossSlots
// (a small batch has one block per lossSamplesPerBlock samples); slots
// is Tuning.LossSlots, lossSlots by default.
func lossRows(n, slots int) int {
	return lossSamplesPerBlock * device.CeilDiv(n, lossSamplesPerBlock*slots)
}

// SampleKeyWord is the index of SampleArgs.key among its 64-bit words.
const SampleKeyWord = 17

// Plan returns the plan for batch size n, building it on first use.
func (l *Learner) Plan(c *cuda.Ctx, n int) (*stepPlan, error) {
	if p, ok := l.Plans[n]; ok {
		return p, nil
	}
	p, err := l.buildPlan(c, n)
	if err != nil {
		return nil, err
	}
	l.Plans[n] = p
	return p, nil
}

func (l *Learner) buildPlan(c *cuda.Ctx, n int) (*stepPlan, error) {
	m, e := l.M, l.ESize
	t1, t2, hd, outw := m.Trunk1, m.Trunk2, m.Head, l.OutW
	p := &stepPlan{N: n}
	bt := l.Mem.Batch(c, l.Stream)
	alloc := bt.Alloc
	upload := func(w device.Words) cuda.DevPtr {
		q := alloc(8 * len(w))
		if bt.Err == nil {
			bt.Err = cuda.Upload(c, q, []uint64(w))
		}
		return q
	}
	var err error
	// eCopy is the E copy of a float32 gradient: its own buffer in bf16
	// mode, the float32 buffer itself in fp32.
	eCopy := func(f cuda.DevPtr, elems int) cuda.DevPtr {
		if l.BF16 {
			return alloc(2 * elems)
		}
		return f
	}
	p.X = alloc(e * 2 * n * ObsWidth)
	// The backward pass reads the online network's activations at s (the
	// first n rows) only.
	p.on = l.NewActs(alloc, 2*n)
	p.tg = l.NewActs(alloc, n)
	// The float32 gradients are kept in fp32 mode only, where they are the
	// next GEMM's operands; their column sums (the bias gradients) come
	// from the kernel that makes them: c51_loss for the head outputs, the
	// masked epilogues for the hidden layers.
	fGrad := func(elems int) cuda.DevPtr {
		if l.BF16 {
			return 0
		}
		return alloc(4 * elems)
	}
	p.g = fGrad(n * outw)
	p.ge = eCopy(p.g, n*outw)
	lossRowsN := lossRows(n, l.S.LossSlots)
	lossBlocks := device.CeilDiv(n, lossRowsN)
	lossPart := alloc(4 * lossBlocks * outw)
	p.g3 = fGrad(n * 4 * hd)
	p.g3e = eCopy(p.g3, n*4*hd)
	p.g2 = fGrad(n * t2)
	p.g2e = eCopy(p.g2, n*t2)
	p.g1 = fGrad(n * t1)
	p.g1e = eCopy(p.g1, n*t1)
	p.Act, p.ret, p.disc, p.w = alloc(4*3*n), alloc(4*n), alloc(4*n), alloc(4*n)
	p.idx, p.mass, p.sample = alloc(8*n), alloc(8*n), alloc(4*n)
	p.tgts = alloc(4 * n * model.NumBranches * m.Atoms)
	if err := bt.Err; err != nil {
		return nil, err
	}

	// Forward: online over [s; s′], target over s′, in the same launches.
	xs := p.X + cuda.DevPtr(e*n*ObsWidth)
	if p.Fwd, err = l.ForwardLaunches(c, "forward", []FwdNet{{&l.Online, p.X, &p.on}, {&l.target, xs, &p.tg}}, l.St); err != nil {
		return nil, err
	}

	// Loss.
	for i, sampled := range []int32{1, 0} {
		var w device.Words
		w.Ptr(p.on.O).Ptr(p.tg.O).Ptr(l.Z).Ptr(p.Act).Ptr(p.ret).Ptr(p.disc).Ptr(p.mass).Ptr(p.w)
		ge := cuda.DevPtr(0)
		if l.BF16 {
			ge = p.ge
		}
		tg := cuda.DevPtr(0)
		if sampled == 0 {
			tg = p.tgts
		}
		w.Ptr(p.g).Ptr(ge).Ptr(p.sample).Ptr(tg)
		var beta0 float64
		var betaSteps int64
		if l.Replay != nil {
			beta0, betaSteps = l.Replay.Cfg.Beta0, int64(l.Replay.Cfg.BetaSteps)
		}
		_, dz, vmin, vmax := model.Support(m)
		w.F64(beta0).I64(betaSteps).F32x2(vmin, vmax).F32i32(dz, int32(n)).I32x2(sampled, int32(lossRowsN))
		w.Ptr(lossPart)
		args := upload(w)
		ll := device.Launch{Name: "c51_loss", F: l.K.Fn["c51_loss"], Grid: device.Dim(lossBlocks), Block: device.Dim(32 * 3 * lossSamplesPerBlock), Args: []any{args, l.St}}
		if i == 0 {
			p.lossSampled = ll
		} else {
			p.lossGiven = ll
		}
	}

	// Backward. Weight gradients reduce over the n rows, split in k so
	// that even a small batch gives every SM work (deterministic: grad_reduce
	// adds the parts in order).
	kchunk := min(max(device.CeilDiv(device.CeilDiv(n, 8), 32)*32, 64), 512)
	if l.S.GradKChunk > 0 {
		kchunk = l.S.GradKChunk
	}
	var reds device.Words
	nred := 0
	// dW jobs: C(o, i) = Σ_r A(o, r)·B(r, i) into the flat gradient at off.
	dW := func(a, b mat, off, rows, cols int) job {
		dst := l.grad + cuda.DevPtr(4*off)
		j := job{a: a, b: b, c: mat{dst, int64(cols), 1}, m: rows, n: cols, k: n, epi: epiStore, kchunk: kchunk}
		if j.splits() == 1 {
			return j
		}
		ws := alloc(4 * j.splits() * rows * cols)
		j.c.p, j.splitStride = ws, int64(rows*cols)
		reds.Ptr(ws).Ptr(dst).Ptr(0).I64(int64(rows * cols)).I64(int64(j.splits())).I64(int64(rows * cols)).I64(1)
		nred++
		return j
	}
	E := func(q cuda.DevPtr, elems int) cuda.DevPtr { return q + cuda.DevPtr(e*elems) }
	// F is the float32 output at column col of a gradient with ld columns,
	// none where the mode keeps no float32 copy.
	F := func(q cuda.DevPtr, col, ld int) mat {
		if q == 0 {
			return mat{}
		}
		return mat{q + cuda.DevPtr(4*col), int64(ld), 1}
	}
	// Stage 1: the head outputs. dW_h = G_hᵀ·z_h; dz_h = G_h·W_h masked by z_h > 0.
	var b1, b2, b3, b4 []job
	for h, i := range HeadOut {
		ly := l.Lay[i]
		col := headCol(m.Atoms, i)
		b1 = append(b1, dW(mat{E(p.ge, col), 1, int64(outw)}, mat{E(p.on.z, h*hd), int64(4 * hd), 1}, ly.W, ly.Out, hd))
		b1 = append(b1, job{a: mat{E(p.ge, col), int64(outw), 1}, b: mat{l.weight(&l.Online, i), int64(hd), 1}, bT: l.weightT(i),
			c: F(p.g3, h*hd, 4*hd), ce: l.eOut(p.g3e, h*hd, 4*hd),
			mask: mat{E(p.on.z, h*hd), int64(4 * hd), 1}, m: n, n: hd, k: ly.Out, epi: epiMask})
	}
	// Stage 2: the head hidden layers. dW = G3_hᵀ·h2; dh2 = G3·W_cat masked by h2 > 0.
	for h, i := range headHidden {
		ly := l.Lay[i]
		b2 = append(b2, dW(mat{E(p.g3e, h*hd), 1, int64(4 * hd)}, mat{p.on.h2, int64(t2), 1}, ly.W, hd, t2))
	}
	b2 = append(b2, job{a: mat{p.g3e, int64(4 * hd), 1}, b: mat{l.Online.wcat, int64(t2), 1}, bT: l.weightT(model.LayerV1),
		c: F(p.g2, 0, t2), ce: l.eOut(p.g2e, 0, t2), mask: mat{p.on.h2, int64(t2), 1}, m: n, n: t2, k: 4 * hd, epi: epiMask})
	// Stage 3: s2. dW = G2ᵀ·h1; dh1 = G2·W_s2 masked by h1 > 0.
	s2, s1 := l.Lay[model.LayerS2], l.Lay[model.LayerS1]
	b3 = append(b3, dW(mat{p.g2e, 1, int64(t2)}, mat{p.on.h1, int64(t1), 1}, s2.W, t2, t1))
	b3 = append(b3, job{a: mat{p.g2e, int64(t2), 1}, b: mat{l.weight(&l.Online, model.LayerS2), int64(t1), 1}, bT: l.weightT(model.LayerS2),
		c: F(p.g1, 0, t1), ce: l.eOut(p.g1e, 0, t1), mask: mat{p.on.h1, int64(t1), 1}, m: n, n: t1, k: t2, epi: epiMask})
	// Stage 4: s1. dW = G1ᵀ·x.
	b4 = append(b4, dW(mat{p.g1e, 1, int64(t1)}, mat{p.X, ObsWidth, 1}, s1.W, t1, ObsWidth))
	// The hidden layers' bias gradients: each masked job sums its float32
	// results by column per row tile of its launch's shape (before the bf16
	// rounding, as the reference does), and grad_reduce adds the row tiles
	// in order into the bias of the layer whose gradient it makes: the head
	// hidden layers' (stage 1, in head order), s2's, s1's.
	var headBias []int
	for _, i := range headHidden {
		headBias = append(headBias, l.Lay[i].B)
	}
	for s, st := range []struct {
		js   []job
		bias []int // of the stage's masked jobs, in order
	}{{b1, headBias}, {b2, []int{s2.B}}, {b3, []int{s1.B}}} {
		parts := colsumParts(n, gemmShapeFor(l.BF16, l.S.TC(), st.js))
		k := 0
		for i := range st.js {
			j := &st.js[i]
			if j.epi != epiMask {
				continue
			}
			if k == len(st.bias) {
				return nil, fmt.Errorf("backward stage %d: more masked jobs than biases (%d)", s+1, len(st.bias))
			}
			j.colsum, j.colsumStride = alloc(4*parts*j.n), int64(j.n)
			reds.Ptr(j.colsum).Ptr(l.grad + cuda.DevPtr(4*st.bias[k])).Ptr(0).I64(int64(j.n)).I64(int64(parts)).I64(int64(j.n)).I64(1)
			nred++
			k++
		}
	}
	for _, js := range [][]job{b1, b2, b3, b4} {
		ls, err := l.backwardLaunches(c, js)
		if err != nil {
			return nil, err
		}
		p.Bwd = append(p.Bwd, ls...)
	}

	// The head outputs' bias gradients: c51_loss's block parts, added by
	// grad_reduce (kind 0) into the bias of the layer each column of O
	// belongs to (none for the padding columns).
	index := make([]int32, outw)
	for c := range index {
		index[c] = -1
	}
	for _, i := range HeadOut {
		ly := l.Lay[i]
		col := headCol(m.Atoms, i)
		for c := range ly.Out {
			index[col+c] = int32(ly.B + c)
		}
	}
	indexP := alloc(4 * outw)
	if err := bt.Err; err != nil {
		return nil, err
	}
	if err := cuda.Upload(c, indexP, index); err != nil {
		return nil, err
	}
	var rw device.Words
	rw.Ptr(lossPart).Ptr(l.grad).Ptr(indexP).I64(int64(outw)).I64(int64(lossBlocks)).I64(int64(outw)).I64(0)
	rw = append(rw, reds...)
	redP := upload(rw)
	// 64 blocks a segment, or one per reduceRunCols columns of the loss's
	// parts (kind 0) where those are more.
	p.reduceL = device.Launch{Name: "grad_reduce", F: l.K.Fn["grad_reduce"], Grid: device.Dim2(max(64, device.CeilDiv(outw, reduceRunCols)), 1+nred), Block: device.Dim(256), Args: []any{redP, l.St}}
	p.normL = device.Launch{Name: "grad_norm", F: l.K.Fn["grad_norm"], Grid: device.Dim(normBlocks), Block: device.Dim(1024),
		Args: []any{l.grad, int64(l.np), l.partial, p.w, p.sample, int64(n), l.St, l.fullFlag()}}
	var aw device.Words
	aw.Ptr(l.Online.p).Ptr(l.grad).Ptr(l.adamM).Ptr(l.adamV).Ptr(l.partial).I64(normBlocks).Ptr(l.paramSegs)
	aw.Ptr(l.LossHist).Ptr(l.NormHist)
	o := l.o
	aw.F64(o.Beta1).F64(o.Beta2).F64(o.LR).F64(o.Eps).F64(o.WeightDecay).F64(o.ClipNorm)
	aw.I64(int64(l.np)).I64(2 * model.NumLayers)
	sr := int64(0)
	if o.StochasticRounding {
		sr = 1
	}
	aw.Ptr(l.stag).I64(int64(l.fullFlag())).I64(sr).I64(int64(l.seed))
	aw.Ptr(l.uNext).Ptr(l.u).I64(int64(l.uLen))
	adamP := upload(aw)
	p.adamL = device.Launch{Name: "adamw", F: l.K.Fn["adamw"], Grid: device.Dim(adamBlocks(l.np)), Block: device.Dim(256), Args: []any{adamP, l.St}}
	p.adamRefreshL = device.Launch{Name: "adamw_refresh", F: l.K.Fn["adamw_refresh"], Grid: p.adamL.Grid, Block: p.adamL.Block,
		Args: []any{adamP, l.St, l.fusedRefresh}}
	p.specL = device.Launch{Name: "spectral", F: l.K.Fn["spectral"], Grid: device.Dim(model.NumLayers), Block: device.Dim(1024), Shared: l.specShared,
		Args: []any{l.Online.p, l.u, l.uNext, l.specSegs, o.SpectralBound, l.specScale, l.St, l.fullFlag()}}
	if err := bt.Err; err != nil {
		return nil, err
	}
	if l.Replay != nil {
		if err := l.replayLaunches(c, p, upload, alloc); err != nil {
			return nil, err
		}
	}
	return p, bt.Err
}

// backwardLaunches are the launches of one backward stage: its jobs in one
// grouped mma.sync launch ("backward"), or, where wgmmaDX moves them, the
// input gradients that fit the wgmma kernels against the transposed
// weights (job.bT, Tuning.WGMMADX) in a launch of their own ("backward_dx") after the
// rest. Either way the masked jobs' column sums come in the row tiles and
// the order of the shape the whole stage takes on mma.sync (ref: the rest
// keeps that shape while it has a masked job, and the moved jobs carry it
// as csbm), so the step computes the same bits on either path.
func (l *Learner) backwardLaunches(c *cuda.Ctx, js []job) ([]device.Launch, error) {
	mode := l.S.WGMMADX
	if !l.K.WGMMA || l.S.MmaOnly {
		mode = "off"
	}
	sp := splitStage(l.BF16, l.S.TC(), mode, js)
	if len(sp.moved) == 0 {
		ln, err := l.gemmLaunch(c, "backward", js, l.St)
		return []device.Launch{ln}, err
	}
	var out []device.Launch
	if len(sp.rest) > 0 {
		var ln device.Launch
		var err error
		if slices.ContainsFunc(sp.rest, func(j job) bool { return j.colsum != 0 }) {
			ln, err = l.gemmLaunchShape(c, "backward", sp.rest, l.St, sp.ref)
		} else {
			ln, err = l.gemmLaunch(c, "backward", sp.rest, l.St)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ln)
	}
	ln, err := l.gemmLaunchShape(c, "backward_dx", sp.moved, l.St, sp.shape)
	if err != nil {
		return nil, err
	}
	return append(out, ln), nil
}

// stageSplit is how a backward stage's jobs go to their launches
// (splitStage): moved, on the wgmma mask kernels in tile shape shape, and
// the rest on mma.sync; ref is the mma.sync shape the whole stage takes,
// whose row tiles the column sums keep either way.
type stageSplit struct {
	moved, rest []job
	shape, ref  kernels.Shape
}

// splitStage decides, for the Tuning.WGMMADX setting mode, which of a backward
// stage's jobs move to the wgmma mask kernels: the input gradients with a
// transposed weight copy (job.bT) that fit them, read against that copy
// and carrying ref's row tiles (csbm); with "fill" only where they fill
// the GPU (fillBlocks). None moves with "off".
func splitStage(bf16, tc bool, mode string, js []job) stageSplit {
	ref := gemmShapeFor(bf16, tc, js)
	none := stageSplit{rest: js, ref: ref}
	if mode == "off" {
		return none
	}
	sp := stageSplit{ref: ref}
	for _, j := range js {
		t := j
		t.b, t.csbm = j.bT, sp.ref.BM
		if j.bT.p != 0 && t.wgmmaFits(bf16) {
			sp.moved = append(sp.moved, t)
		} else {
			sp.rest = append(sp.rest, j)
		}
	}
	if len(sp.moved) == 0 {
		return none
	}
	sp.shape = shapeAmong(kernels.WGMMAMaskShapes(bf16), sp.moved)
	blocks := 0
	for _, j := range sp.moved {
		blocks += j.blocks(sp.shape)
	}
	if mode == "fill" && blocks < fillBlocks {
		return none
	}
	return sp
}

// eOut is the E output of a masked epilogue: its own buffer in bf16 mode,
// none in fp32 (the float32 output is the next GEMM's operand itself).
func (l *Learner) eOut(q cuda.DevPtr, col, ld int) mat {
	if !l.BF16 {
		return mat{}
	}
	return mat{q + cuda.DevPtr(l.ESize*col), int64(ld), 1}
}

// gradientLaunches are the forward pass, the loss and the backward pass of plan p
// on the batch already in its buffers (given weights).
//
// The head outputs' bias gradients come out of the loss itself
// (c51_loss's block parts, added by grad_reduce).
func (l *Learner) gradientLaunches(p *stepPlan, loss device.Launch) []device.Launch {
	ls := append([]device.Launch{}, p.Fwd...)
	ls = append(ls, loss)
	ls = append(ls, p.Bwd[:]...)
	return append(ls, p.reduceL, p.normL)
}

// updateLaunches are the steps after the gradient and the spectral step's
// power iteration (p.specL, which reads the weights before the update):
// AdamW, which commits the new u, and the refresh of the online copies,
// which applies the spectral factors and counts the step, both in one
// launch, adamw_refresh (ADR 0028: as two launches, adamw then refresh,
// the same bits took 1.1–1.8 µs a step more at batch 256, and that path
// was removed).
func (l *Learner) updateLaunches(p *stepPlan) []device.Launch {
	return []device.Launch{p.adamRefreshL}
}

// TrainLaunches is one whole training step from the replay buffer, in
// the order of its dependencies (trainParts, then the priority update).
func (l *Learner) TrainLaunches(p *stepPlan) []device.Launch {
	early, grad, update, prio := l.trainParts(p)
	return append(append(append(grad, early...), update...), prio...)
}

// trainParts splits a training step from the replay buffer where its
// graph forks:
//   - early: the spectral step's power iteration, which reads only the
//     weights before the update and u, so it runs from the step's start
//     beside the rest, joined before AdamW (ADR 0025; on the main stream
//     before AdamW it was slower, and that schedule was removed);
//   - grad: the sampling, the gradient and its norm;
//   - update: AdamW and the refresh (one launch: updateLaunches), beside
//   - prio: the priority update, which needs only the per-sample losses and
//     the loss, and which the next step's sampling waits for. prio_claim
//     and prio_set read the step number that grad_norm copies
//     (StepState.tc) while the refresh advances t, and they skip a step
//     whose loss is not finite themselves. A step whose loss is finite but
//     whose gradient norm is not (it stops the run with ErrNonFinite) may
//     or may not have updated the priorities.
func (l *Learner) trainParts(p *stepPlan) (early, grad, update, prio []device.Launch) {
	grad = append([]device.Launch{p.sampleL}, l.gradientLaunches(p, p.lossSampled)...)
	return []device.Launch{p.specL}, grad, l.updateLaunches(p), p.prioL
}

func (l *Learner) runAll(c *cuda.Ctx, ls []device.Launch) error {
	for i := range ls {
		if err := ls[i].Run(c, l.Stream); err != nil {
			return err
		}
	}
	return nil
}

// Tuning.StepsPerGraph is how many training steps one graph launch
// replays: with more than one, Train launches graphs of that many steps,
// one after the other in capture order, and the single-step graph for the
// rest of a readback chunk. Every kernel reads the step's state (its
// number, the abort flags) from device memory, so the steps of a graph are
// the same launches on the same data as single launches, and train the
// same bits; what changes is that the GPU goes from one step to the next
// inside a graph, without the gap between two graph launches (ADR 0027).

// CaptureStep captures plan p's training step as a CUDA graph, once.
func (l *Learner) CaptureStep(c *cuda.Ctx, p *stepPlan) (cuda.GraphExec, error) {
	if p.graph != 0 {
		return p.graph, nil
	}
	x, err := l.captureSteps(c, p, 1)
	if err != nil {
		return 0, err
	}
	p.graph = x
	return x, nil
}

// CaptureStepsPerGraph captures plan p's graph of stepsPerGraph training
// steps, once; 0 when a graph holds one step.
func (l *Learner) CaptureStepsPerGraph(c *cuda.Ctx, p *stepPlan) (cuda.GraphExec, error) {
	if l.S.StepsPerGraph == 1 || p.graphK != 0 {
		return p.graphK, nil
	}
	x, err := l.captureSteps(c, p, l.S.StepsPerGraph)
	if err != nil {
		return 0, err
	}
	p.graphK = x
	return x, nil
}

// captureSteps captures n training steps of plan p, one after the other,
// as one CUDA graph.
func (l *Learner) captureSteps(c *cuda.Ctx, p *stepPlan, n int) (cuda.GraphExec, error) {
	if err := c.Sync(l.Stream); err != nil {
		return 0, err
	}
	early, grad, update, prio := l.trainParts(p)
	return captureFork(c, l.S.Launch.Dependent, forkStreams{l.Stream, l.side, l.early},
		forkEvents{l.fork, l.join, l.earlyFork, l.earlyJoin}, n, early, grad, update, prio)
}

// forkStreams are captureFork's streams: main, the branch beside the
// update (side) and the branch from the start (early).
type forkStreams struct{ main, side, early cuda.Stream }

// forkEvents are captureFork's events: fork and join of the side branch,
// and of the early one.
type forkEvents struct{ fork, join, earlyFork, earlyJoin cuda.Event }

// captureFork captures one CUDA graph, and instantiates it, of repeat
// copies, one after the other, of three branches: early on stream s.early
// from the copy's start (forked by earlyFork), before then after on the
// main stream, after waiting for early (earlyJoin), and branch on the side
// stream beside after (forked by fork once before is queued, joined by
// join before the copy ends). A copy starts once the one before has ended
// on every stream; the events are recorded again for each copy.
// With dependent set every launch is a programmatic dependent of the one
// before it on its stream (launchMode.dependent), early's first excepted,
// which has none: the graph holds kernels only, so every edge is between
// two kernels. An empty early adds no branch.
func captureFork(c *cuda.Ctx, dependent bool, s forkStreams, ev forkEvents, repeat int, early, before, after, branch []device.Launch) (cuda.GraphExec, error) {
	if err := c.BeginCapture(s.main); err != nil {
		return 0, err
	}
	runErr := func() error {
		for range repeat {
			if err := queueFork(c, dependent, s, ev, early, before, after, branch); err != nil {
				return err
			}
		}
		return nil
	}()
	return device.EndCapture(c, s.main, runErr)
}

// queueFork queues one copy of captureFork's branches.
func queueFork(c *cuda.Ctx, dependent bool, s forkStreams, ev forkEvents, early, before, after, branch []device.Launch) error {
	if len(early) > 0 {
		if err := c.Record(ev.earlyFork, s.main); err != nil {
			return err
		}
		if err := c.WaitEvent(s.early, ev.earlyFork); err != nil {
			return err
		}
		for i := range early {
			if err := early[i].RunIn(c, s.early, dependent && i > 0); err != nil {
				return err
			}
		}
		if err := c.Record(ev.earlyJoin, s.early); err != nil {
			return err
		}
	}
	for i := range before {
		if err := before[i].RunIn(c, s.main, dependent); err != nil {
			return err
		}
	}
	if err := c.Record(ev.fork, s.main); err != nil {
		return err
	}
	if err := c.WaitEvent(s.side, ev.fork); err != nil {
		return err
	}
	for i := range branch {
		if err := branch[i].RunIn(c, s.side, dependent); err != nil {
			return err
		}
	}
	if err := c.Record(ev.join, s.side); err != nil {
		return err
	}
	if len(early) > 0 {
		if err := c.WaitEvent(s.main, ev.earlyJoin); err != nil {
			return err
		}
	}
	for i := range after {
		if err := after[i].RunIn(c, s.main, dependent); err != nil {
			return err
		}
	}
	return c.WaitEvent(s.main, ev.join)
}
