package gpu

import (
	"fmt"

	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// devBacktest runs the greedy backtest on the device, in one of two ways.
//
// By default (batched) it is rollout's backtest (market.BacktestBatch)
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
// from those actions with market.Backtest itself, so a device report is a
// CPU report of the same actions by construction; the kernel's own
// equity, which the tests compare with the report's, shows that its
// accounting (and so the agent features the network saw) is the CPU's.
type devBacktest struct {
	mem      arena // the foreign dataset's bars and the buffers
	foreign  *devMarket
	cap      int // bars the buffers hold
	act      cuda.DevPtr
	equity   cuda.DevPtr
	result   cuda.DevPtr
	args     cuda.DevPtr
	hostAct  []int32
	hostEq   []float64
	lastEq   []float64 // the kernel's equity of the last run (tests)
	lastBars int
	clock    *deviceClock       // TimeEpochs
	oneBlock bool               // bt_run even where bt_run_cluster fits (tests)
	bench    *market.Benchmarks // of the last range
	cluster  bool               // the last run used bt_run_cluster
	kernel   bool               // bt_run / bt_run_cluster instead of the batched backtest (Tuning.Backtest)
	// lastStats is how the last batched backtest decided (tests, bench).
	lastStats market.BatchStats
}

// runBatch is the batched backtest (devBacktest): rollout's, with the
// device network's greedy actions. The device clock counts each call's
// device work (upload, forward pass, head, read-back).
func (b *devBacktest) runBatch(c *cuda.Ctx, l *learner, ds *market.Dataset, r market.Range) (market.Report, error) {
	if r.From >= 0 && r.To <= ds.Bars.Len() && r.Len() >= 2 && !b.bench.For(ds, r) {
		var err error
		if b.bench, err = market.NewBenchmarks(ds, r); err != nil {
			return market.Report{}, err
		}
	}
	var bench *market.Benchmarks
	if b.bench.For(ds, r) {
		bench = b.bench
	}
	g := func(obs []float32, rows int, dst []market.Action) error {
		if err := b.clock.begin(c, l.stream); err != nil {
			return err
		}
		if err := l.greedy(c, obs, rows, dst); err != nil {
			return err
		}
		return b.clock.end(c, l.stream, "backtest")
	}
	rep, st, err := rollout.BacktestStats(ds, r, g, bench)
	b.lastStats = st
	return rep, err
}

// btArgsWords is the size of struct BacktestArgs in 64-bit words.
const btArgsWords = 14 + 2 + 2 + 9*7 + 4 + 5 + 1 + 3 + 1

// market returns ds on the device: the trainer's own (uploaded with the
// collector) or a foreign one, uploaded once and kept until another comes.
func (b *devBacktest) market(c *cuda.Ctx, l *learner, own *devMarket, ds *market.Dataset) (*devMarket, error) {
	if own != nil && own.ds == ds {
		return own, nil
	}
	if b.foreign != nil && b.foreign.ds == ds {
		return b.foreign, nil
	}
	if err := c.Sync(l.stream); err != nil {
		return nil, err
	}
	if err := b.mem.free(c); err != nil {
		return nil, err
	}
	b.foreign, b.cap = nil, 0
	m, err := newDevMarket(c, b.mem.batch(c, l.stream), ds, 0)
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
func clusterShared(l *learner, act int) int {
	m, lay := l.m, &l.lay
	align := func(n int) int { return (n + 15) &^ 15 }
	rows := func(n, k int) int { return align(ceilDiv(n, btCluster) * k * l.esz) }
	n := align(act) + rows(m.Trunk1, lay[model.LayerS1].In) + rows(m.Trunk2, m.Trunk1) + rows(4*m.Head, m.Trunk2)
	for _, i := range headOut {
		n += rows(lay[i].Out, m.Head)
	}
	return n
}

// run plays the greedy policy of l's online network over bars r of ds and
// returns the report market.Backtest books for the actions it took.
func (b *devBacktest) run(c *cuda.Ctx, l *learner, own *devMarket, ds *market.Dataset, r market.Range) (market.Report, error) {
	n := r.Len()
	if ds == nil || ds.Bars == nil || r.From < 0 || r.To > ds.Bars.Len() || n < 2 {
		// market.Backtest words the error (the range, the missing bars).
		return market.Backtest(ds, r, &recordedPolicy{})
	}
	if !b.kernel {
		return b.runBatch(c, l, ds, r)
	}
	mk, err := b.market(c, l, own, ds)
	if err != nil {
		return market.Report{}, err
	}
	if n > b.cap {
		bt := b.mem.batch(c, l.stream)
		capN := max(n, 2*b.cap)
		b.act, b.equity, b.result, b.args = bt.alloc(4*3*capN), bt.alloc(8*capN), bt.alloc(16), bt.alloc(8*btArgsWords)
		if bt.err != nil {
			return market.Report{}, bt.err
		}
		b.cap = capN
	}
	// The contract every backtest of r trades (market.Backtest books the
	// report with it below, so the device's ruin must see the same).
	in, err := market.TradedInstrument(ds, r)
	if err != nil {
		return market.Report{}, err
	}
	var w words
	mk.wordsWith(&w, in)
	w.i64(int64(r.From)).i64(int64(r.To)).f64(in.InitialCapital).f64(in.MarginFloor * in.InitialCapital)
	l.rowLayers(&w)
	w.i64(1).i64(2).i64(3).i64(7)
	m := l.m
	widths := []int{obsWidth, m.Trunk1, m.Trunk2, 4 * m.Head, l.outw}
	shared := 0
	for _, x := range widths {
		w.i64(int64(x))
		shared += 4 * x
	}
	w.ptr(l.z).ptr(b.act).ptr(b.equity).ptr(b.result).f32i32(l.margin, 0)
	if len(w) != btArgsWords {
		return market.Report{}, fmt.Errorf("backtest arguments: %d words, want %d", len(w), btArgsWords)
	}
	if err := c.HtoDAsync(b.args, ptrOf(w), 8*len(w), l.stream); err != nil {
		return market.Report{}, err
	}
	f, grid, block := l.k.fn["bt_run"], 1, 1024
	b.cluster = false
	if cs := clusterShared(l, shared); l.d.arch() >= 90 && cs <= maxClusterShared && !b.oneBlock {
		f, grid, block, shared = l.k.fn["bt_run_cluster"], btCluster, btThreads, cs
		b.cluster = true
	}
	if shared > 48<<10 {
		if err := c.SetMaxDynamicShared(f, shared); err != nil {
			return market.Report{}, err
		}
	}
	if err := b.clock.begin(c, l.stream); err != nil {
		return market.Report{}, err
	}
	if err := c.Launch(f, dim(grid), dim(block), shared, l.stream, b.args); err != nil {
		return market.Report{}, err
	}
	if err := b.clock.end(c, l.stream, "backtest"); err != nil {
		return market.Report{}, err
	}
	if err := c.Sync(l.stream); err != nil {
		return market.Report{}, err
	}
	res := make([]int64, 2)
	if err := cuda.Download(c, res, b.result); err != nil {
		return market.Report{}, err
	}
	decided := int(res[0])
	if cap(b.hostAct) < 3*decided {
		b.hostAct = make([]int32, 3*decided)
	}
	acts := b.hostAct[:3*decided]
	if decided > 0 {
		if err := cuda.Download(c, acts, b.act); err != nil {
			return market.Report{}, err
		}
	}
	if cap(b.hostEq) < n {
		b.hostEq = make([]float64, n)
	}
	b.lastEq, b.lastBars = b.hostEq[:n], decided
	if err := cuda.Download(c, b.lastEq, b.equity); err != nil {
		return market.Report{}, err
	}
	// Buy-and-hold and flat do not depend on the weights: once per range.
	if !b.bench.For(ds, r) {
		if b.bench, err = market.NewBenchmarks(ds, r); err != nil {
			return market.Report{}, err
		}
	}
	p := &recordedPolicy{from: r.From, acts: acts}
	rep, err := market.BacktestWith(ds, r, p, b.bench)
	if err == nil {
		err = p.err
	}
	return rep, err
}

// recordedPolicy answers market.Backtest with the actions the device took,
// bar by bar. A question beyond them means the host's accounting reached
// a bar the device's did not (a ruin one side only): an error, never a
// silent flat.
type recordedPolicy struct {
	from int
	acts []int32
	err  error
}

// Act returns the device's action at bar t.
func (p *recordedPolicy) Act(t int, _ []float32) market.Action {
	i := t - p.from
	if i < 0 || 3*i+2 >= len(p.acts) {
		if p.err == nil {
			p.err = fmt.Errorf("backtest: the host asks for bar %d, the device decided %d bars from %d: their accounting differs", t, len(p.acts)/3, p.from)
		}
		return market.Action{Dir: 1}
	}
	return market.Action{Dir: int(p.acts[3*i]), Size: int(p.acts[3*i+1]), Exit: int(p.acts[3*i+2])}
}

func (b *devBacktest) free(c *cuda.Ctx) error { return b.mem.free(c) }
