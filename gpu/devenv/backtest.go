package devenv

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/step"

	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// Backtest runs the greedy backtest on the device, in one of two ways.
//
// By default (batched) it is rollout's backtest (sim.BacktestBatch)
// with the device network as the policy: the host walks the range with the
// exact accounting of market and asks the inference GEMMs for the greedy
// actions of many observations per call (every bar's flat decision, then
// chains of held positions), a few calls per backtest instead of one
// forward pass per bar. Its report is the host environment's driven by the
// device network, by construction.
//
// With DQNFLOW_BACKTEST=kernel (kept for comparison, visit.sh epoch) it
// runs the kernels bt_run and bt_run_cluster: one block, or one cluster of
// blocks holding the weights in their shared memory, walks the range bar
// by bar, with the online network's forward pass for one observation, the
// greedy head and the environment's accounting, so a backtest is one
// launch and one read-back of the actions. The host then books the report
// from those actions with sim.Backtest itself, so a device report is a
// CPU report of the same actions by construction; the kernel's own
// equity, which the tests compare with the report's, shows that its
// accounting (and so the agent features the network saw) is the CPU's.
type Backtest struct {
	mem      device.Arena // the foreign dataset's bars and the buffers
	foreign  *devMarket
	cap      int // bars the buffers hold
	act      cuda.DevPtr
	equity   cuda.DevPtr
	result   cuda.DevPtr
	args     cuda.DevPtr
	HostAct  []int32
	hostEq   []float64
	LastEq   []float64 // the kernel's equity of the last run (tests)
	LastBars int
	Clock    *device.Clock   // TimeEpochs
	OneBlock bool            // bt_run even where bt_run_cluster fits (tests)
	bench    *sim.Benchmarks // of the last range
	Cluster  bool            // the last run used bt_run_cluster
	Kernel   bool            // bt_run / bt_run_cluster instead of the batched backtest (Tuning.Backtest)
	// LastStats is how the last batched backtest decided (tests, bench).
	LastStats sim.BatchStats
}

// runBatch is the batched backtest (Backtest): rollout's, with the
// device network's greedy actions. The device clock counts each call's
// device work (upload, forward pass, head, read-back).
func (b *Backtest) runBatch(c *cuda.Ctx, l *step.Learner, ds *market.Dataset, r market.Range) (sim.Report, error) {
	if r.From >= 0 && r.To <= ds.Bars.Len() && r.Len() >= 2 && !b.bench.For(ds, r) {
		var err error
		if b.bench, err = sim.NewBenchmarks(ds, r); err != nil {
			return sim.Report{}, err
		}
	}
	var bench *sim.Benchmarks
	if b.bench.For(ds, r) {
		bench = b.bench
	}
	g := func(obs []float32, rows int, dst []market.Action) error {
		if err := b.Clock.Begin(c, l.Stream); err != nil {
			return err
		}
		if err := l.Greedy(c, obs, rows, dst); err != nil {
			return err
		}
		return b.Clock.End(c, l.Stream, "backtest")
	}
	rep, st, err := rollout.BacktestStats(ds, r, g, bench)
	b.LastStats = st
	return rep, err
}

// btArgsWords is the size of struct BacktestArgs in 64-bit words.
const btArgsWords = 14 + 2 + 2 + 9*7 + 4 + 5 + 1 + 3 + 1

// market returns ds on the device: the trainer's own (uploaded with the
// collector) or a foreign one, uploaded once and kept until another comes.
func (b *Backtest) market(c *cuda.Ctx, l *step.Learner, own *devMarket, ds *market.Dataset) (*devMarket, error) {
	if own != nil && own.ds == ds {
		return own, nil
	}
	if b.foreign != nil && b.foreign.ds == ds {
		return b.foreign, nil
	}
	if err := c.Sync(l.Stream); err != nil {
		return nil, err
	}
	if err := b.mem.Free(c); err != nil {
		return nil, err
	}
	b.foreign, b.cap = nil, 0
	m, err := newDevMarket(c, b.mem.Batch(c, l.Stream), ds, 0)
	if err != nil {
		return nil, err
	}
	b.foreign = m
	return m, nil
}

// BT_CLUSTER and BT_THREADS of kernels/env.cu: blocks of bt_run_cluster's
// cluster and threads per block.
const (
	btCluster = 8
	btThreads = 512
	// maxClusterShared is the dynamic shared memory a block may opt into
	// on Hopper (227 KiB).
	maxClusterShared = 227 << 10
)

// clusterShared is the dynamic shared memory of a bt_run_cluster block:
// the activations (act bytes), then the largest slice of every layer's
// weights (⌈N/8⌉ rows), each 16-byte aligned, as the kernel lays them out.
func clusterShared(l *step.Learner, act int) int {
	m, lay := l.M, &l.Lay
	align := func(n int) int { return (n + 15) &^ 15 }
	rows := func(n, k int) int { return align(device.CeilDiv(n, btCluster) * k * l.ESize) }
	n := align(act) + rows(m.Trunk1, lay[model.LayerS1].In) + rows(m.Trunk2, m.Trunk1) + rows(4*m.Head, m.Trunk2)
	for _, i := range step.HeadOut {
		n += rows(lay[i].Out, m.Head)
	}
	return n
}

// Run plays the greedy policy of l's online network over bars r of ds and
// returns the report sim.Backtest books for the actions it took.
func (b *Backtest) Run(c *cuda.Ctx, l *step.Learner, own *devMarket, ds *market.Dataset, r market.Range) (sim.Report, error) {
	n := r.Len()
	if ds == nil || ds.Bars == nil || r.From < 0 || r.To > ds.Bars.Len() || n < 2 {
		// sim.Backtest words the error (the range, the missing bars).
		return sim.Backtest(ds, r, &RecordedPolicy{})
	}
	if !b.Kernel {
		return b.runBatch(c, l, ds, r)
	}
	mk, err := b.market(c, l, own, ds)
	if err != nil {
		return sim.Report{}, err
	}
	if n > b.cap {
		bt := b.mem.Batch(c, l.Stream)
		capN := max(n, 2*b.cap)
		b.act, b.equity, b.result, b.args = bt.Alloc(4*3*capN), bt.Alloc(8*capN), bt.Alloc(16), bt.Alloc(8*btArgsWords)
		if bt.Err != nil {
			return sim.Report{}, bt.Err
		}
		b.cap = capN
	}
	// The contract every backtest of r trades (sim.Backtest books the
	// report with it below, so the device's ruin must see the same).
	in, err := market.TradedInstrument(ds, r)
	if err != nil {
		return sim.Report{}, err
	}
	var w device.Words
	mk.wordsWith(&w, in)
	w.I64(int64(r.From)).I64(int64(r.To)).F64(in.InitialCapital).F64(in.MarginFloor * in.InitialCapital)
	l.RowLayers(&w)
	w.I64(1).I64(2).I64(3).I64(7)
	m := l.M
	widths := []int{step.ObsWidth, m.Trunk1, m.Trunk2, 4 * m.Head, l.OutW}
	shared := 0
	for _, x := range widths {
		w.I64(int64(x))
		shared += 4 * x
	}
	w.Ptr(l.Z).Ptr(b.act).Ptr(b.equity).Ptr(b.result).F32i32(l.Margin, 0)
	if len(w) != btArgsWords {
		return sim.Report{}, fmt.Errorf("backtest arguments: %d words, want %d", len(w), btArgsWords)
	}
	if err := c.HtoDAsync(b.args, device.PtrOf(w), 8*len(w), l.Stream); err != nil {
		return sim.Report{}, err
	}
	f, grid, block := l.K.Fn["bt_run"], 1, 1024
	b.Cluster = false
	if cs := clusterShared(l, shared); l.D.Arch() >= 90 && cs <= maxClusterShared && !b.OneBlock {
		f, grid, block, shared = l.K.Fn["bt_run_cluster"], btCluster, btThreads, cs
		b.Cluster = true
	}
	if shared > 48<<10 {
		if err := c.SetMaxDynamicShared(f, shared); err != nil {
			return sim.Report{}, err
		}
	}
	if err := b.Clock.Begin(c, l.Stream); err != nil {
		return sim.Report{}, err
	}
	if err := c.Launch(f, device.Dim(grid), device.Dim(block), shared, l.Stream, b.args); err != nil {
		return sim.Report{}, err
	}
	if err := b.Clock.End(c, l.Stream, "backtest"); err != nil {
		return sim.Report{}, err
	}
	if err := c.Sync(l.Stream); err != nil {
		return sim.Report{}, err
	}
	res := make([]int64, 2)
	if err := cuda.Download(c, res, b.result); err != nil {
		return sim.Report{}, err
	}
	decided := int(res[0])
	if cap(b.HostAct) < 3*decided {
		b.HostAct = make([]int32, 3*decided)
	}
	acts := b.HostAct[:3*decided]
	if decided > 0 {
		if err := cuda.Download(c, acts, b.act); err != nil {
			return sim.Report{}, err
		}
	}
	if cap(b.hostEq) < n {
		b.hostEq = make([]float64, n)
	}
	b.LastEq, b.LastBars = b.hostEq[:n], decided
	if err := cuda.Download(c, b.LastEq, b.equity); err != nil {
		return sim.Report{}, err
	}
	// Buy-and-hold and flat do not depend on the weights: once per range.
	if !b.bench.For(ds, r) {
		if b.bench, err = sim.NewBenchmarks(ds, r); err != nil {
			return sim.Report{}, err
		}
	}
	p := &RecordedPolicy{From: r.From, Acts: acts}
	rep, err := sim.BacktestWith(ds, r, p, b.bench)
	if err == nil {
		err = p.Err
	}
	return rep, err
}

// RecordedPolicy answers sim.Backtest with the actions the device took,
// bar by bar. A question beyond them means the host's accounting reached
// a bar the device's did not (a ruin one side only): an error, never a
// silent flat.
type RecordedPolicy struct {
	From int
	Acts []int32
	Err  error
}

// Act returns the device's action at bar t.
func (p *RecordedPolicy) Act(t int, _ []float32) market.Action {
	i := t - p.From
	if i < 0 || 3*i+2 >= len(p.Acts) {
		if p.Err == nil {
			p.Err = fmt.Errorf("backtest: the host asks for bar %d, the device decided %d bars from %d: their accounting differs", t, len(p.Acts)/3, p.From)
		}
		return market.Action{Dir: 1}
	}
	return market.Action{Dir: int(p.Acts[3*i]), Size: int(p.Acts[3*i+1]), Exit: int(p.Acts[3*i+2])}
}

func (b *Backtest) Free(c *cuda.Ctx) error { return b.mem.Free(c) }
