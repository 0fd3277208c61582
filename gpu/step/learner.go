package step

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"math"
	"slices"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// netBufs is one network in device memory: the float32 masters p (Layout
// order) and the GEMM copy gw of every weight matrix (E; each matrix at a
// 16-byte aligned offset, learner.gwOff, in the order s1, s2, v1, a1_0,
// a1_1, a1_2, v2, a2_0, a2_1, a2_2). So the head-hidden weights are one
// matrix, wcat [4·head×trunk2], a view into gw; their biases are copied
// side by side into bcat [4·head] (float32). Other biases are read from p.
// The online network's gw also holds, past gwLen, the transposed copies
// of the weights whose input gradients may run on wgmma (learner.gwT).
type netBufs struct {
	p, gw, wcat, bcat cuda.DevPtr
	refresh           device.Launch // masters → copies (setState, target sync)
}

// StepState field offsets (struct StepState in kernels/common.cu).
const (
	StT       = 0
	StLocal   = 8
	stMMin    = 16
	StAbort   = 24
	stMaxPrio = 32
	stLoss    = 40
	stTC      = 48
	stBytes   = 56
)

const (
	normBlocks = 32 // blocks of grad_norm, and partial sums (at most RED_THREADS)
	HistCap    = 1 << 16
)

// Learner is the device half of a GPU trainer: online and target networks,
// AdamW moments, spectral vectors, the step state, and per batch size a
// plan of buffers and launches. All methods run on the device thread
// (inside Do).
type Learner struct {
	D     *device.Device
	S     device.Setup // the backend's tuning, resolved on d
	K     *device.Kernels
	M     config.ModelConfig
	o     config.OptimConfig
	BF16  bool   // GEMM operands and activations are bf16 (bf16-mixed and bf16)
	full  bool   // precision bf16: the trained state is stored as bf16 values
	seed  uint64 // the run's seed: the stochastic rounding's bits (bf16.SRBits)
	ESize int
	Lay   [model.NumLayers]model.Layer
	np    int
	OutW  int                  // width of a row of head outputs (headCols)
	gwOff [model.NumLayers]int // element offset of each weight in a GEMM copy
	gwLen int
	// gwT is where the online GEMM copy holds layer i's weight transposed
	// (in×out rows of ld elements, element (o, i) at i·ld + o), the B
	// operand of its input gradient on wgmma (wgmmaDX): s2 and the
	// head-hidden layers side by side (wcatᵀ, trunk2×4·head), and each
	// head output. off < 0: none (no wgmma, or DQNFLOW_WGMMA_DX=off).
	gwT    [model.NumLayers]struct{ off, ld int }
	gwTLen int
	Stream cuda.Stream
	// side runs the priority update beside AdamW in the captured training
	// step, forked and joined by the events fork and join (captureFork);
	// early runs the spectral step's power iteration beside the sampling,
	// the forward and the backward passes, forked by earlyFork at the
	// step's start and joined by earlyJoin before AdamW (ADR 0025).
	side, early          cuda.Stream
	fork, join           cuda.Event
	earlyFork, earlyJoin cuda.Event
	Mem                  device.Arena

	Online, target        netBufs
	grad, adamM, adamV, u cuda.DevPtr
	uNext                 cuda.DevPtr // the spectral step's new u, which AdamW commits (kernels spectral, adamw)
	uLen                  int         // elements of u: the weight matrices' rows
	stag                  cuda.DevPtr // [2·adamBlocks]uint64: per block of kernel adamw, Adam terms ≠ 0 and stores that absorbed them
	St, partial, Z        cuda.DevPtr
	LossHist, NormHist    cuda.DevPtr
	paramSegs, specSegs   cuda.DevPtr
	specScale             cuda.DevPtr   // [NumLayers] float32: the spectral step's factor per weight
	specRefresh           device.Launch // the online refresh of a training step: applies specScale
	fusedRefresh          cuda.DevPtr   // struct FusedRefresh of kernel adamw_refresh (ADR 0028)
	specShared            int
	Plans                 map[int]*stepPlan
	inf                   *inferPlan
	Replay                *Replay // nil for a bare learner (harness)
	// Margin is the greedy policy's margin for a position over flat in Q
	// units (config.RunConfig.GreedyMargin, model.Greedy): head_infer's
	// and the backtest's. 0 for a bare learner.
	Margin float32
}

// NewLearner allocates a learner for model m in the given precision with
// the state s (rounded to bf16 in precision bf16); seed keys the
// stochastic rounding of precision bf16; su is the backend's tuning on d.
// Call inside Do.
func NewLearner(c *cuda.Ctx, d *device.Device, su device.Setup, m config.ModelConfig, o config.OptimConfig, precision string, seed uint64, s *model.State) (*Learner, error) {
	if err := model.Check(m); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"trunk1", m.Trunk1}, {"trunk2", m.Trunk2}, {"head", m.Head}} {
		if f.v%8 != 0 {
			return nil, fmt.Errorf("model.%s = %d: the CUDA backend needs a multiple of 8 (its GEMMs move rows in 16-byte pieces)", f.name, f.v)
		}
	}
	if lossShared(m.Atoms) > 48<<10 {
		return nil, fmt.Errorf("%w: model.atoms = %d: the CUDA backend's loss kernel holds at most %d atoms a block", config.ErrInvalid, m.Atoms, maxLossAtoms())
	}
	if o.StochasticRounding && precision != config.PrecisionBF16 {
		return nil, fmt.Errorf("%w: optim.stochastic_rounding = true: needs precision %q (got %q)", config.ErrInvalid, config.PrecisionBF16, precision)
	}
	bf := precision != config.PrecisionFP32
	k, err := moduleFor(c, d, m, bf, su)
	if err != nil {
		return nil, err
	}
	l := &Learner{D: d, S: su, K: k, M: m, o: o, BF16: bf, full: precision == config.PrecisionBF16, seed: seed, ESize: 4,
		Lay: model.Layers(m), np: model.NumParams(m), Plans: map[int]*stepPlan{}}
	_, l.OutW = headCols(m.Atoms)
	l.layoutCopies(k.WGMMA && su.WGMMADX != "off")
	if bf {
		l.ESize = 2
	}
	if l.Stream, err = c.NewStream(); err != nil {
		return nil, err
	}
	fail := func(err error) (*Learner, error) { l.Free(c); return nil, err }
	if l.side, err = c.NewStream(); err != nil {
		return fail(err)
	}
	if l.fork, err = c.NewOrderEvent(); err != nil {
		return fail(err)
	}
	if l.join, err = c.NewOrderEvent(); err != nil {
		return fail(err)
	}
	if l.early, err = c.NewStream(); err != nil {
		return fail(err)
	}
	if l.earlyFork, err = c.NewOrderEvent(); err != nil {
		return fail(err)
	}
	if l.earlyJoin, err = c.NewOrderEvent(); err != nil {
		return fail(err)
	}
	alloc := func(bytes int) cuda.DevPtr {
		if err != nil {
			return 0
		}
		var p cuda.DevPtr
		p, err = l.Mem.Alloc(c, l.Stream, bytes)
		return p
	}
	np := l.np
	for _, net := range []*netBufs{&l.Online, &l.target} {
		net.p = alloc(4 * np)
		gw := l.gwLen
		if net == &l.Online {
			gw += l.gwTLen
		}
		net.gw = alloc(l.ESize * gw)
		net.bcat = alloc(4 * 4 * m.Head)
	}
	uLen := 0
	for _, ly := range l.Lay {
		uLen += ly.Out
	}
	l.grad, l.adamM, l.adamV, l.u = alloc(4*np), alloc(4*np), alloc(4*np), alloc(4*uLen)
	l.uNext, l.uLen = alloc(4*uLen), uLen
	l.specScale = alloc(4 * model.NumLayers)
	l.stag = alloc(16 * adamBlocks(np))
	l.St, l.partial, l.Z = alloc(stBytes), alloc(8*normBlocks), alloc(4*m.Atoms)
	l.LossHist, l.NormHist = alloc(4*HistCap), alloc(4*HistCap)
	if err != nil {
		return fail(err)
	}
	z, _, _, _ := model.Support(m)
	if err := cuda.Upload(c, l.Z, z); err != nil {
		return fail(err)
	}
	// mmin starts at +Inf; prio_set resets it after every step.
	if err := cuda.Upload(c, l.St+stMMin, []uint64{0x7ff0000000000000}); err != nil {
		return fail(err)
	}
	if err := cuda.Upload(c, l.St+stMaxPrio, []float64{1}); err != nil {
		return fail(err)
	}
	// Parameter segments for AdamW (decay on weights only) and matrices
	// for the spectral step.
	var ps, ss device.Words
	maxIn, maxOut, uoff := 0, 0, 0
	for _, ly := range l.Lay {
		ps.I64(int64(ly.W)).I64(int64(ly.Out * ly.In)).I64(1).I64(0)
		ps.I64(int64(ly.B)).I64(int64(ly.Out)).I64(0).I64(0)
		ss.I64(int64(ly.W)).I64(int64(ly.Out)).I64(int64(ly.In)).I64(int64(uoff))
		uoff += ly.Out
		maxIn, maxOut = max(maxIn, ly.In), max(maxOut, ly.Out)
	}
	l.paramSegs, l.specSegs = alloc(8*len(ps)), alloc(8*len(ss))
	if err != nil {
		return fail(err)
	}
	if err := cuda.Upload(c, l.paramSegs, ps); err != nil {
		return fail(err)
	}
	if err := cuda.Upload(c, l.specSegs, ss); err != nil {
		return fail(err)
	}
	l.specShared = 4 * (maxIn + maxOut)
	if l.specShared+spectralStatic > 48<<10 {
		if err := c.SetMaxDynamicShared(k.Fn["spectral"], l.specShared); err != nil {
			return fail(err)
		}
	}
	for _, net := range []*netBufs{&l.Online, &l.target} {
		net.wcat = l.weight(net, model.LayerV1)
		if net.refresh, err = l.refreshLaunch(c, net, 0); err != nil {
			return fail(err)
		}
	}
	if l.specRefresh, err = l.refreshLaunch(c, &l.Online, l.specScale); err != nil {
		return fail(err)
	}
	if l.fusedRefresh, err = l.fusedRefreshArgs(c); err != nil {
		return fail(err)
	}
	if err := l.setState(c, s); err != nil {
		return fail(err)
	}
	return l, nil
}

// gwOrder is the order of the weight matrices in a GEMM copy: the
// head-hidden layers v1, a1_0, a1_1, a1_2 next to each other, so that they
// form wcat.
var gwOrder = [model.NumLayers]int{model.LayerS1, model.LayerS2, model.LayerV1, model.LayerA1(0), model.LayerA1(1), model.LayerA1(2),
	model.LayerV2, model.LayerA2(0), model.LayerA2(1), model.LayerA2(2)}

// layoutCopies places the weights in a GEMM copy (gwOff, gwLen, in
// gwOrder) and, with transposes, the online copy's transposed weights
// (gwT) after them: s2's, wcatᵀ (the head-hidden layers', head columns
// apart) and each head output's (rows padded to 8 elements). Each matrix
// and row starts at a multiple of 8 elements, 16 bytes or more.
func (l *Learner) layoutCopies(transposes bool) {
	l.gwLen = 0
	for _, i := range gwOrder {
		l.gwOff[i] = l.gwLen
		l.gwLen += align8(l.Lay[i].Out * l.Lay[i].In)
	}
	for i := range l.gwT {
		l.gwT[i].off = -1
	}
	l.gwTLen = 0
	if !transposes {
		return
	}
	next := func(ld, rows int) int {
		off := l.gwLen + l.gwTLen
		l.gwTLen += align8(ld * rows)
		return off
	}
	s2 := l.Lay[model.LayerS2]
	l.gwT[model.LayerS2].off, l.gwT[model.LayerS2].ld = next(s2.Out, s2.In), s2.Out
	cat := next(4*l.M.Head, l.M.Trunk2)
	for h, i := range headHidden {
		l.gwT[i].off, l.gwT[i].ld = cat+h*l.M.Head, 4*l.M.Head
	}
	for _, i := range HeadOut {
		ly := l.Lay[i]
		l.gwT[i].off, l.gwT[i].ld = next(align8(ly.Out), ly.In), align8(ly.Out)
	}
}

// weightT is the B operand of layer i's input gradient G·W on wgmma,
// B(k, n) = W(k, n) for k < out and n < in, from the transposed copy in
// the online network's gw (k-contiguous), or the zero mat where there is
// none.
func (l *Learner) weightT(i int) mat {
	t := l.gwT[i]
	if t.off < 0 {
		return mat{}
	}
	return mat{l.Online.gw + cuda.DevPtr(l.ESize*t.off), 1, int64(t.ld)}
}

// refreshLaunch builds the launch that rewrites net's GEMM copies from its
// masters (kernel refresh): every weight into gw (the online network's
// also transposed, where gwT says) and the head-hidden biases into bcat.
// With scale ≠ 0 (the training step's refresh) it also applies the
// spectral step's factor of each weight to the masters.
func (l *Learner) refreshLaunch(c *cuda.Ctx, net *netBufs, scale cuda.DevPtr) (device.Launch, error) {
	segs := l.copySegs(net)
	p, err := l.uploadCopySegs(c, segs)
	if err != nil {
		return device.Launch{}, err
	}
	return device.Launch{Name: "refresh", F: l.K.Fn["refresh"], Grid: device.Dim2(32, len(segs)), Block: device.Dim(256),
		Args: []any{net.p, net.gw, net.bcat, p, scale, l.St, l.fullFlag()}}, nil
}

// copySeg is struct CopySeg of kernels/optim.cu: one copy of the refresh.
type copySeg struct{ src, count, dst, kind, layer, tdst, in, ld int }

// copySegs are the copies kernel refresh writes for net: every weight
// matrix into gw (the online network's also transposed, where gwT says),
// then the head-hidden biases into bcat.
func (l *Learner) copySegs(net *netBufs) []copySeg {
	const toGW, toBias = 0, 2
	var segs []copySeg
	for i, ly := range l.Lay {
		tdst, ld := -1, 0
		if net == &l.Online {
			tdst, ld = l.gwT[i].off, l.gwT[i].ld
		}
		segs = append(segs, copySeg{ly.W, ly.Out * ly.In, l.gwOff[i], toGW, i, tdst, ly.In, ld})
	}
	for h, i := range headHidden {
		segs = append(segs, copySeg{l.Lay[i].B, l.M.Head, h * l.M.Head, toBias, -1, -1, 0, 0})
	}
	return segs
}

// uploadCopySegs uploads segs as an array of struct CopySeg.
func (l *Learner) uploadCopySegs(c *cuda.Ctx, segs []copySeg) (cuda.DevPtr, error) {
	var w device.Words
	for _, s := range segs {
		for _, v := range []int{s.src, s.count, s.dst, s.kind, s.layer, s.tdst, s.in, s.ld} {
			w.I64(int64(v))
		}
	}
	p, err := l.Mem.Alloc(c, l.Stream, 8*len(w))
	if err != nil {
		return 0, err
	}
	return p, cuda.Upload(c, p, w)
}

// maxFusedCopies is MAX_FUSED_COPIES of kernels/optim.cu: the most
// copies kernel adamw_refresh holds in shared memory.
const maxFusedCopies = 32

// fusedRefreshArgs uploads struct FusedRefresh for kernel adamw_refresh:
// the training step's online refresh (specRefresh's copies, sorted by
// their place in the parameter vector, so that each thread's ascending
// elements find theirs moving forward), the spectral factors, and a
// zeroed counter of the blocks done.
func (l *Learner) fusedRefreshArgs(c *cuda.Ctx) (cuda.DevPtr, error) {
	segs := l.copySegs(&l.Online)
	if len(segs) > maxFusedCopies {
		return 0, fmt.Errorf("adamw_refresh: %d copies of the online network, at most %d", len(segs), maxFusedCopies)
	}
	slices.SortFunc(segs, func(a, b copySeg) int { return a.src - b.src })
	for i := 1; i < len(segs); i++ {
		if segs[i].src < segs[i-1].src+segs[i-1].count {
			return 0, fmt.Errorf("adamw_refresh: copies at %d and %d of the parameters overlap", segs[i-1].src, segs[i].src)
		}
	}
	sp, err := l.uploadCopySegs(c, segs)
	if err != nil {
		return 0, err
	}
	done, err := l.Mem.Alloc(c, l.Stream, 8)
	if err != nil {
		return 0, err
	}
	var w device.Words
	w.Ptr(l.Online.gw).Ptr(l.Online.bcat).Ptr(sp).I64(int64(len(segs))).Ptr(l.specScale).Ptr(done)
	p, err := l.Mem.Alloc(c, l.Stream, 8*len(w))
	if err != nil {
		return 0, err
	}
	return p, cuda.Upload(c, p, w)
}

// fullFlag is the kernels' flag of precision bf16 (1) or not (0).
func (l *Learner) fullFlag() int32 {
	if l.full {
		return 1
	}
	return 0
}

// setState uploads s and refreshes both networks' copies. The step state's
// counters are set to s.Step and 0; the abort flag is cleared. In
// precision bf16 the values uploaded are s's rounded to the nearest bf16
// (s itself is not changed).
func (l *Learner) setState(c *cuda.Ctx, s *model.State) error {
	if err := s.Check(l.M); err != nil {
		return err
	}
	if l.full {
		s = s.Clone()
		for _, x := range [][]float32{s.Online, s.Target, s.AdamM, s.AdamV} {
			bf16.RoundSlice(x)
		}
		for _, u := range s.U {
			bf16.RoundSlice(u)
		}
	}
	for _, x := range []struct {
		p cuda.DevPtr
		v []float32
	}{{l.Online.p, s.Online}, {l.target.p, s.Target}, {l.adamM, s.AdamM}, {l.adamV, s.AdamV}} {
		if err := cuda.Upload(c, x.p, x.v); err != nil {
			return err
		}
	}
	off := 0
	for i, ly := range l.Lay {
		if err := cuda.Upload(c, l.u+cuda.DevPtr(4*off), s.U[i]); err != nil {
			return err
		}
		off += ly.Out
	}
	if err := cuda.Upload(c, l.St, []int64{s.Step, 0}); err != nil {
		return err
	}
	if err := cuda.Upload(c, l.St+StAbort, []int32{0, 0}); err != nil {
		return err
	}
	if l.Replay != nil {
		if err := l.Replay.resetClaims(c, l); err != nil {
			return err
		}
	}
	return l.refreshBoth(c)
}

func (l *Learner) refreshBoth(c *cuda.Ctx) error {
	for _, net := range []*netBufs{&l.Online, &l.target} {
		if err := net.refresh.Run(c, l.Stream); err != nil {
			return err
		}
	}
	return c.Sync(l.Stream)
}

// State downloads the learner state.
func (l *Learner) State(c *cuda.Ctx) (*model.State, error) {
	if err := c.Sync(l.Stream); err != nil {
		return nil, err
	}
	np := l.np
	s := &model.State{Online: make([]float32, np), Target: make([]float32, np), AdamM: make([]float32, np), AdamV: make([]float32, np)}
	for _, x := range []struct {
		p cuda.DevPtr
		v []float32
	}{{l.Online.p, s.Online}, {l.target.p, s.Target}, {l.adamM, s.AdamM}, {l.adamV, s.AdamV}} {
		if err := cuda.Download(c, x.v, x.p); err != nil {
			return nil, err
		}
	}
	off := 0
	for i, ly := range l.Lay {
		s.U[i] = make([]float32, ly.Out)
		if err := cuda.Download(c, s.U[i], l.u+cuda.DevPtr(4*off)); err != nil {
			return nil, err
		}
		off += ly.Out
	}
	t := make([]int64, 1)
	if err := cuda.Download(c, t, l.St+StT); err != nil {
		return nil, err
	}
	s.Step = t[0]
	return s, nil
}

// stepState is the host copy of StepState.
type stepState struct {
	T, Local int64
	mmin     uint64
	Abort    int32
	pad      int32
	maxPrio  float64
	loss     float32
	pad2     float32
	tc       int64
}

func (l *Learner) ReadState(c *cuda.Ctx) (stepState, error) {
	var s [1]stepState
	if err := c.Sync(l.Stream); err != nil {
		return s[0], err
	}
	err := cuda.Download(c, s[:], l.St)
	return s[0], err
}

// gradNorm is √(Σ partials) in partial order, as adamw computes it.
func (l *Learner) gradNorm(c *cuda.Ctx) (float64, error) {
	p := make([]float64, normBlocks)
	if err := cuda.Download(c, p, l.partial); err != nil {
		return 0, err
	}
	var s float64
	for _, x := range p {
		s += x
	}
	return math.Sqrt(s), nil
}

// SyncTarget applies target ← τ·online + (1−τ)·target and refreshes the
// target's copies.
func (l *Learner) SyncTarget(c *cuda.Ctx, tau float64) error {
	if !(tau > 0 && tau <= 1) {
		return fmt.Errorf("sync target: tau = %g: must be in (0, 1]", tau)
	}
	cp := int32(0)
	if tau == 1 {
		cp = 1
	}
	if err := c.Launch(l.K.Fn["ema"], device.Dim(256), device.Dim(256), 0, l.Stream,
		l.Online.p, l.target.p, int64(l.np), float32(tau), float32(1-tau), cp, l.fullFlag()); err != nil {
		return err
	}
	if err := l.target.refresh.Run(c, l.Stream); err != nil {
		return err
	}
	return c.Sync(l.Stream)
}

func (l *Learner) Free(c *cuda.Ctx) error {
	var first error
	for _, p := range l.Plans {
		for _, g := range []cuda.GraphExec{p.graph, p.graphK} {
			if g != 0 {
				if err := c.DestroyGraphExec(g); err != nil && first == nil {
					first = err
				}
			}
		}
	}
	l.Plans = nil
	if err := l.Mem.Free(c); err != nil && first == nil {
		first = err
	}
	for _, e := range []*cuda.Event{&l.fork, &l.join, &l.earlyFork, &l.earlyJoin} {
		if *e != 0 {
			if err := c.DestroyEvent(*e); err != nil && first == nil {
				first = err
			}
			*e = 0
		}
	}
	for _, s := range []*cuda.Stream{&l.side, &l.early, &l.Stream} {
		if *s != 0 {
			if err := c.DestroyStream(*s); err != nil && first == nil {
				first = err
			}
			*s = 0
		}
	}
	return first
}

// spectralStatic is the static shared memory of the spectral kernel:
// part[SPEC_THREADS/32][SPEC_COLS] floats.
const spectralStatic = 4 * 32 * 256

// ObsWidth is the observation width, market.ObsDim.
const ObsWidth = market.ObsDim

// adamBlocks is the grid of kernel adamw for np parameters (ADAM_PER_BLOCK
// of kernels/optim.cu, 1,024, per block of 256 threads); each block keeps
// its own pair of stagnation counters.
func adamBlocks(np int) int { return device.CeilDiv(np, adamPerBlock) }

// adamPerBlock is ADAM_PER_BLOCK of kernels/optim.cu.
const adamPerBlock = 1024

// ResetStagnation zeroes the stagnation counts of kernel adamw.
func (l *Learner) ResetStagnation(c *cuda.Ctx) error {
	return cuda.Upload(c, l.stag, make([]uint64, 2*adamBlocks(l.np)))
}

// Stagnation returns the share of the AdamW updates since resetStagnation
// that the stored parameter absorbed (trainer.TrainStats.Stagnation), and
// the number of updates it is a share of.
func (l *Learner) Stagnation(c *cuda.Ctx) (float64, uint64, error) {
	if err := c.Sync(l.Stream); err != nil {
		return 0, 0, err
	}
	pairs := make([]uint64, 2*adamBlocks(l.np))
	if err := cuda.Download(c, pairs, l.stag); err != nil {
		return 0, 0, err
	}
	var v [2]uint64
	for i, x := range pairs {
		v[i%2] += x
	}
	if v[0] == 0 {
		return 0, 0, nil
	}
	return float64(v[1]) / float64(v[0]), v[0], nil
}
