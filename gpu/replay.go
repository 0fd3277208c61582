package gpu

import (
	"fmt"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/replay"
)

const agentW = market.NumAgentFeatures

// devReplay is the prioritised replay buffer in device memory, with the
// semantics of package replay (kernels/replay.cu). The device collector
// writes transitions into it (env_commit, kernels/env.cu). The host
// mirrors the ring's size and cursor, which only Collect changes; p_max lives in the
// step state, which the priority kernel updates.
type devReplay struct {
	cfg      config.ReplayConfig
	capacity int
	base     int // L, the first leaf node
	size     int
	cursor   int

	bar, agent, action, ret, disc, nextBar, nextAgent cuda.DevPtr
	tree, owner, features                             cuda.DevPtr
}

// newDevReplay allocates an empty buffer and uploads the dataset's
// features, from which the sampler rebuilds observations.
func newDevReplay(c *cuda.Ctx, l *learner, cfg config.ReplayConfig, ds *market.Dataset) (*devReplay, error) {
	if _, err := replay.New(cfg); err != nil { // the same validation as the CPU buffer
		return nil, err
	}
	r := &devReplay{cfg: cfg, capacity: cfg.Capacity, base: 1}
	for r.base < r.capacity {
		r.base <<= 1
	}
	n := r.capacity
	bt := l.mem.batch(c, l.stream)
	alloc := bt.alloc
	r.bar, r.agent, r.action = alloc(4*n), alloc(4*n*agentW), alloc(4*n*3)
	r.ret, r.disc, r.nextBar, r.nextAgent = alloc(4*n), alloc(4*n), alloc(4*n), alloc(4*n*agentW)
	r.tree, r.owner = alloc(8*2*r.base), alloc(8*n) // claims zeroed: none stands
	r.features = alloc(4 * len(ds.Features))
	if err := bt.err; err != nil {
		return nil, err
	}
	if err := cuda.Upload(c, r.features, ds.Features); err != nil {
		return nil, err
	}
	return r, c.Sync(l.stream)
}

func (r *devReplay) arrays(w *words) {
	w.ptr(r.bar).ptr(r.agent).ptr(r.action).ptr(r.ret).ptr(r.disc).ptr(r.nextBar).ptr(r.nextAgent).ptr(r.tree).i64(int64(r.base))
}

// replayLaunches adds the sampling and priority launches to plan p.
func (l *learner) replayLaunches(c *cuda.Ctx, p *stepPlan, upload func(words) cuda.DevPtr, alloc func(int) cuda.DevPtr) error {
	r := l.replay
	var sw words
	r.arrays(&sw)
	sw.ptr(r.features).ptr(p.x).ptr(p.act).ptr(p.ret).ptr(p.disc).ptr(p.idx).ptr(p.mass).i64(int64(p.n)).i64(0)
	if len(sw) != sampleKeyWord+1 {
		return fmt.Errorf("sample arguments: %d words, want %d", len(sw), sampleKeyWord+1)
	}
	p.sampleArgs = upload(sw)
	spb := samplesPerBlock(p.n)
	p.sampleL = launch{name: "sample", f: l.k.fn["sample"], grid: dim(ceilDiv(p.n, spb)), block: dim(sampleThreads), args: []any{p.sampleArgs, l.st, int32(spb)}}
	var pw words
	pw.ptr(r.tree).i64(int64(r.base)).ptr(p.idx).ptr(p.sample).ptr(r.owner).i64(int64(p.n))
	pw.f64(r.cfg.PriorityEps).f64(r.cfg.Alpha)
	pa := upload(pw)
	grid := dim(ceilDiv(p.n, 256))
	p.prioL = append([]launch{
		{name: "prio_claim", f: l.k.fn["prio_claim"], grid: grid, block: dim(256), args: []any{pa, l.st}},
		{name: "prio_set", f: l.k.fn["prio_set"], grid: grid, block: dim(256), args: []any{pa, l.st}},
	}, r.treeLaunches(l, l.st)...)
	return nil
}

// sampleBlock and sampleThreads are SAMPLE_BLOCK and SAMPLE_THREADS of
// kernels/replay.cu: the most samples and the threads of a block of kernel
// sample.
const (
	sampleBlock   = 32
	sampleThreads = 256
)

// samplesPerBlock is the samples a block of kernel sample takes at batch
// n: all SAMPLE_BLOCK (the tree descents of a block run side by side in
// its first warp) from batch 4096, where the blocks fill the GPU, and 8
// below, so that a small batch spreads over more SMs (measured 2026-12-02:
// 32 a block took 9.1 µs at batch 256 against 5.9 µs for the one-warp-a-
// sample kernel before, and 9.4 against 20.3 µs at 16384).
func samplesPerBlock(n int) int {
	if n >= 4096 {
		return sampleBlock
	}
	return 8
}

// resetClaims clears the priority kernels' claims (t·2³² + k, prio_claim),
// which rise with the step t: learner.setState, the one place that sets t,
// calls it. A new buffer starts with them cleared.
func (r *devReplay) resetClaims(c *cuda.Ctx, l *learner) error {
	return c.MemsetD8Async(r.owner, 0, 8*r.capacity, l.stream)
}

// treeSpan is TREE_SPAN of kernels/replay.cu (passed by kernelOptions):
// leaves per tree_sub block.
const treeSpan = 2048

// treeLaunches recompute every inner node of the tree from the leaves (the
// same bits as any sequence of replay set calls): subtrees of treeSpan
// leaves, then the nodes above their roots. st may be 0 (always run).
func (r *devReplay) treeLaunches(l *learner, st cuda.DevPtr) []launch {
	span := min(r.base, treeSpan)
	top := r.base / span
	return []launch{
		{name: "tree_sub", f: l.k.fn["tree_sub"], grid: dim(top), block: dim(1024), args: []any{r.tree, int64(r.base), st}},
		{name: "tree_top", f: l.k.fn["tree_top"], grid: dim(1), block: dim(1024), args: []any{r.tree, int64(top), st}},
	}
}

// rebuild recomputes every inner node of the tree from the leaves.
func (r *devReplay) rebuild(c *cuda.Ctx, l *learner) error {
	for _, ln := range r.treeLaunches(l, 0) {
		if err := ln.run(c, l.stream); err != nil {
			return err
		}
	}
	return nil
}

// storage downloads the buffer as a replay.Storage.
func (r *devReplay) storage(c *cuda.Ctx, l *learner) (replay.Storage, error) {
	n := r.size
	s := replay.Storage{
		Bar: make([]int32, n), Agent: make([]float32, n*agentW), Action: make([]int32, n*3),
		Return: make([]float32, n), Discount: make([]float32, n), NextBar: make([]int32, n),
		NextAgent: make([]float32, n*agentW), Mass: make([]float64, n), Size: n, Cursor: r.cursor,
	}
	if err := c.Sync(l.stream); err != nil {
		return s, err
	}
	if n > 0 {
		for _, e := range []error{
			cuda.Download(c, s.Bar, r.bar), cuda.Download(c, s.Agent, r.agent), cuda.Download(c, s.Action, r.action),
			cuda.Download(c, s.Return, r.ret), cuda.Download(c, s.Discount, r.disc), cuda.Download(c, s.NextBar, r.nextBar),
			cuda.Download(c, s.NextAgent, r.nextAgent), cuda.Download(c, s.Mass, r.tree+cuda.DevPtr(8*r.base)),
		} {
			if e != nil {
				return s, e
			}
		}
	}
	mp := make([]float64, 1)
	if err := cuda.Download(c, mp, l.st+stMaxPrio); err != nil {
		return s, err
	}
	s.MaxPriority = mp[0]
	return s, nil
}

// load replaces the buffer's contents with s (validated by the caller
// through replay.FromStorage or Load).
func (r *devReplay) load(c *cuda.Ctx, l *learner, s replay.Storage) error {
	if err := c.MemsetD8Async(r.tree, 0, 8*2*r.base, l.stream); err != nil {
		return err
	}
	if err := c.Sync(l.stream); err != nil {
		return err
	}
	if s.Size > 0 {
		for _, e := range []error{
			cuda.Upload(c, r.bar, s.Bar), cuda.Upload(c, r.agent, s.Agent), cuda.Upload(c, r.action, s.Action),
			cuda.Upload(c, r.ret, s.Return), cuda.Upload(c, r.disc, s.Discount), cuda.Upload(c, r.nextBar, s.NextBar),
			cuda.Upload(c, r.nextAgent, s.NextAgent), cuda.Upload(c, r.tree+cuda.DevPtr(8*r.base), s.Mass),
		} {
			if e != nil {
				return e
			}
		}
	}
	if err := cuda.Upload(c, l.st+stMaxPrio, []float64{s.MaxPriority}); err != nil {
		return err
	}
	r.size, r.cursor = s.Size, s.Cursor
	if err := r.rebuild(c, l); err != nil {
		return err
	}
	return c.Sync(l.stream)
}
