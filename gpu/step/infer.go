package step

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"

	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// inferPlan runs the online network on up to rows observations: the
// collector's greedy actions, the backtest's, and the harness's logits and
// distributions.
type inferPlan struct {
	rows          int
	xf, x         cuda.DevPtr // float32 and E observations
	a             Acts
	act, Q        cuda.DevPtr
	logits, probs cuda.DevPtr
	fwd           map[int][]device.Launch // per row count
	hostAct       []int32
}

func (l *Learner) inferPlanFor(c *cuda.Ctx, rows int) (*inferPlan, error) {
	if l.inf != nil && rows <= l.inf.rows {
		return l.inf, nil
	}
	rows = max(rows, 64)
	m, e := l.M, l.ESize
	bt := l.Mem.Batch(c, l.Stream)
	alloc := bt.Alloc
	p := &inferPlan{rows: rows, fwd: map[int][]device.Launch{}}
	p.xf, p.x = alloc(4*rows*ObsWidth), alloc(e*rows*ObsWidth)
	p.a = l.NewActs(alloc, rows)
	p.act, p.Q = alloc(4*rows*3), alloc(4*rows*model.NumActions)
	p.logits, p.probs = alloc(4*rows*model.NumActions*m.Atoms), alloc(4*rows*model.NumActions*m.Atoms)
	if err := bt.Err; err != nil {
		return nil, err
	}
	// Zero observations: rows past a call's observations (infer pads to a
	// power of two) read zeros, never uninitialised memory.
	if err := c.MemsetD8Async(p.x, 0, e*rows*ObsWidth, l.Stream); err != nil {
		return nil, err
	}
	l.inf = p
	return p, nil
}

// Infer runs the online network on rows observations (rows×ObsDim float32)
// and leaves the head outputs of every row in the plan's buffers: greedy
// actions, Q values and, when full, logits and probabilities.
func (l *Learner) Infer(c *cuda.Ctx, obs []float32, rows int, full bool) (*inferPlan, error) {
	if len(obs) != rows*ObsWidth {
		return nil, fmt.Errorf("infer: obs has %d values, want rows·ObsDim = %d·%d", len(obs), rows, ObsWidth)
	}
	// The GEMMs run on a power-of-two number of rows (at least 64), so
	// that callers with ever-changing row counts (the batched backtest)
	// build and upload a bounded set of launches; the rows past the
	// observations are computed and never read (a row's result depends on
	// that row alone).
	padded := 64
	for padded < rows {
		padded *= 2
	}
	p, err := l.inferPlanFor(c, padded)
	if err != nil {
		return nil, err
	}
	fw, ok := p.fwd[padded]
	if !ok {
		a := p.a
		a.Rows = padded
		// No step state: inference always runs.
		if fw, err = l.ForwardLaunches(c, "infer", []FwdNet{{&l.Online, p.x, &a}}, 0); err != nil {
			return nil, err
		}
		p.fwd[padded] = fw
	}
	if err := c.HtoDAsync(p.xf, device.PtrOf(obs), 4*len(obs), l.Stream); err != nil {
		return nil, err
	}
	if err := c.Launch(l.K.Fn["cast_rows"], device.Dim(device.CeilDiv(len(obs), 256)), device.Dim(256), 0, l.Stream, p.xf, p.x, int64(len(obs))); err != nil {
		return nil, err
	}
	for i := range fw {
		if err := fw[i].Run(c, l.Stream); err != nil {
			return nil, err
		}
	}
	lg, pr := cuda.DevPtr(0), cuda.DevPtr(0)
	if full {
		lg, pr = p.logits, p.probs
	}
	if err := c.Launch(l.K.Fn["head_infer"], device.Dim(HeadInferBlocks(rows)), device.Dim(HeadInferThreads), 0, l.Stream,
		p.a.O, int32(rows), l.Z, lg, pr, p.Q, p.act, l.Margin); err != nil {
		return nil, err
	}
	return p, c.Sync(l.Stream)
}

// Greedy writes the online network's greedy action of every branch for rows
// observations (rollout.Greedy, with the learner's margin over flat),
// through the inference GEMMs: the host environment's path, which the
// device backtest is tested against.
func (l *Learner) Greedy(c *cuda.Ctx, obs []float32, rows int, dst []market.Action) error {
	if len(dst) != rows {
		return fmt.Errorf("greedy: dst has %d actions, want %d", len(dst), rows)
	}
	p, err := l.Infer(c, obs, rows, false)
	if err != nil {
		return err
	}
	if cap(p.hostAct) < 3*rows {
		p.hostAct = make([]int32, 3*rows)
	}
	a := p.hostAct[:3*rows]
	if err := cuda.Download(c, a, p.act); err != nil {
		return err
	}
	for r := range rows {
		dst[r] = market.Action{Dir: int(a[3*r]), Size: int(a[3*r+1]), Exit: int(a[3*r+2])}
	}
	return nil
}

// HeadInferThreads is the block of head_infer (kernels/head.cu): four
// warps, each one (row, branch) pair; headInferBlocks is its grid for rows
// observations.
const HeadInferThreads = 128

func HeadInferBlocks(rows int) int { return device.CeilDiv(3*rows, HeadInferThreads/32) }
