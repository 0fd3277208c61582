package step

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/replay"
)

const AgentW = market.NumAgentFeatures

// Replay is the prioritised replay buffer in device memory, with the
// semantics of package replay (kernels/replay.cu). The device collector
// writes transitions into it (env_commit, kernels/env.cu). The host
// mirrors the ring's size and cursor, which only Collect changes; p_max lives in the
// step state, which the priority kernel updates.
type Replay struct {
	Cfg      config.ReplayConfig
	Capacity int
	base     int // L, the first leaf node
	Size     int
	Cursor   int

	bar, agent, action, ret, disc, nextBar, nextAgent cuda.DevPtr
	tree, owner, Features                             cuda.DevPtr
}

// NewReplay allocates an empty buffer and uploads the dataset's
// features, from which the sampler rebuilds observations.
func NewReplay(c *cuda.Ctx, l *Learner, cfg config.ReplayConfig, ds *market.Dataset) (*Replay, error) {
	if _, err := replay.New(cfg); err != nil { // the same validation as the CPU buffer
		return nil, err
	}
	r := &Replay{Cfg: cfg, Capacity: cfg.Capacity, base: 1}
	for r.base < r.Capacity {
		r.base <<= 1
	}
	n := r.Capacity
	bt := l.Mem.Batch(c, l.Stream)
	alloc := bt.Alloc
	r.bar, r.agent, r.action = alloc(4*n), alloc(4*n*AgentW), alloc(4*n*3)
	r.ret, r.disc, r.nextBar, r.nextAgent = alloc(4*n), alloc(4*n), alloc(4*n), alloc(4*n*AgentW)
	r.tree, r.owner = alloc(8*2*r.base), alloc(8*n) // claims zeroed: none stands
	r.Features = alloc(4 * len(ds.Features))
	if err := bt.Err; err != nil {
		return nil, err
	}
	if err := cuda.Upload(c, r.Features, ds.Features); err != nil {
		return nil, err
	}
	return r, c.Sync(l.Stream)
}

func (r *Replay) Arrays(w *device.Words) {
	w.Ptr(r.bar).Ptr(r.agent).Ptr(r.action).Ptr(r.ret).Ptr(r.disc).Ptr(r.nextBar).Ptr(r.nextAgent).Ptr(r.tree).I64(int64(r.base))
}

// replayLaunches adds the sampling and priority launches to plan p.
func (l *Learner) replayLaunches(c *cuda.Ctx, p *stepPlan, upload func(device.Words) cuda.DevPtr, alloc func(int) cuda.DevPtr) error {
	r := l.Replay
	var sw device.Words
	r.Arrays(&sw)
	sw.Ptr(r.Features).Ptr(p.X).Ptr(p.Act).Ptr(p.ret).Ptr(p.disc).Ptr(p.idx).Ptr(p.mass).I64(int64(p.N)).I64(0)
	if len(sw) != SampleKeyWord+1 {
		return fmt.Errorf("sample arguments: %d words, want %d", len(sw), SampleKeyWord+1)
	}
	p.SampleArgs = upload(sw)
	spb := samplesPerBlock(p.N)
	p.sampleL = device.Launch{Name: "sample", F: l.K.Fn["sample"], Grid: device.Dim(device.CeilDiv(p.N, spb)), Block: device.Dim(sampleThreads), Args: []any{p.SampleArgs, l.St, int32(spb)}}
	var pw device.Words
	pw.Ptr(r.tree).I64(int64(r.base)).Ptr(p.idx).Ptr(p.sample).Ptr(r.owner).I64(int64(p.N))
	pw.F64(r.Cfg.PriorityEps).F64(r.Cfg.Alpha)
	pa := upload(pw)
	grid := device.Dim(device.CeilDiv(p.N, 256))
	p.prioL = append([]device.Launch{
		{Name: "prio_claim", F: l.K.Fn["prio_claim"], Grid: grid, Block: device.Dim(256), Args: []any{pa, l.St}},
		{Name: "prio_set", F: l.K.Fn["prio_set"], Grid: grid, Block: device.Dim(256), Args: []any{pa, l.St}},
	}, r.treeLaunches(l, l.St)...)
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
func (r *Replay) resetClaims(c *cuda.Ctx, l *Learner) error {
	return c.MemsetD8Async(r.owner, 0, 8*r.Capacity, l.Stream)
}

// treeSpan is TREE_SPAN of kernels/replay.cu (passed by kernelOptions):
// leaves per tree_sub block.
const treeSpan = 2048

// treeLaunches recompute every inner node of the tree from the leaves (the
// same bits as any sequence of replay set calls): subtrees of treeSpan
// leaves, then the nodes above their roots. st may be 0 (always run).
func (r *Replay) treeLaunches(l *Learner, st cuda.DevPtr) []device.Launch {
	span := min(r.base, treeSpan)
	top := r.base / span
	return []device.Launch{
		{Name: "tree_sub", F: l.K.Fn["tree_sub"], Grid: device.Dim(top), Block: device.Dim(1024), Args: []any{r.tree, int64(r.base), st}},
		{Name: "tree_top", F: l.K.Fn["tree_top"], Grid: device.Dim(1), Block: device.Dim(1024), Args: []any{r.tree, int64(top), st}},
	}
}

// Rebuild recomputes every inner node of the tree from the leaves.
func (r *Replay) Rebuild(c *cuda.Ctx, l *Learner) error {
	for _, ln := range r.treeLaunches(l, 0) {
		if err := ln.Run(c, l.Stream); err != nil {
			return err
		}
	}
	return nil
}

// Storage downloads the buffer as a replay.Storage.
func (r *Replay) Storage(c *cuda.Ctx, l *Learner) (replay.Storage, error) {
	n := r.Size
	s := replay.Storage{
		Bar: make([]int32, n), Agent: make([]float32, n*AgentW), Action: make([]int32, n*3),
		Return: make([]float32, n), Discount: make([]float32, n), NextBar: make([]int32, n),
		NextAgent: make([]float32, n*AgentW), Mass: make([]float64, n), Size: n, Cursor: r.Cursor,
	}
	if err := c.Sync(l.Stream); err != nil {
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
	if err := cuda.Download(c, mp, l.St+stMaxPrio); err != nil {
		return s, err
	}
	s.MaxPriority = mp[0]
	return s, nil
}

// Load replaces the buffer's contents with s (validated by the caller
// through replay.FromStorage or Load).
func (r *Replay) Load(c *cuda.Ctx, l *Learner, s replay.Storage) error {
	if err := c.MemsetD8Async(r.tree, 0, 8*2*r.base, l.Stream); err != nil {
		return err
	}
	if err := c.Sync(l.Stream); err != nil {
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
	if err := cuda.Upload(c, l.St+stMaxPrio, []float64{s.MaxPriority}); err != nil {
		return err
	}
	r.Size, r.Cursor = s.Size, s.Cursor
	if err := r.Rebuild(c, l); err != nil {
		return err
	}
	return c.Sync(l.Stream)
}
