package gpu

import (
	"fmt"

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
	a             acts
	act, q        cuda.DevPtr
	logits, probs cuda.DevPtr
	fwd           map[int][]launch // per row count
	hostAct       []int32
}

func (l *learner) inferPlanFor(c *cuda.Ctx, rows int) (*inferPlan, error) {
	if l.inf != nil && rows <= l.inf.rows {
		return l.inf, nil
	}
	rows = max(rows, 64)
	m, e := l.m, l.esz
	bt := l.mem.batch(c, l.stream)
	alloc := bt.alloc
	p := &inferPlan{rows: rows, fwd: map[int][]launch{}}
	p.xf, p.x = alloc(4*rows*obsWidth), alloc(e*rows*obsWidth)
	p.a = l.newActs(alloc, rows)
	p.act, p.q = alloc(4*rows*3), alloc(4*rows*model.NumActions)
	p.logits, p.probs = alloc(4*rows*model.NumActions*m.Atoms), alloc(4*rows*model.NumActions*m.Atoms)
	if err := bt.err; err != nil {
		return nil, err
	}
	// Zero observations: rows past a call's observations (infer pads to a
	// power of two) read zeros, never uninitialised memory.
	if err := c.MemsetD8Async(p.x, 0, e*rows*obsWidth, l.stream); err != nil {
		return nil, err
	}
	l.inf = p
	return p, nil
}

// infer runs the online network on rows observations (rows×ObsDim float32)
// and leaves the head outputs of every row in the plan's buffers: greedy
// actions, Q values and, when full, logits and probabilities.
func (l *learner) infer(c *cuda.Ctx, obs []float32, rows int, full bool) (*inferPlan, error) {
	if len(obs) != rows*obsWidth {
		return nil, fmt.Errorf("infer: obs has %d values, want rows·ObsDim = %d·%d", len(obs), rows, obsWidth)
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
		a.rows = padded
		// No step state: inference always runs.
		if fw, err = l.forwardLaunches(c, "infer", []fwdNet{{&l.online, p.x, &a}}, 0); err != nil {
			return nil, err
		}
		p.fwd[padded] = fw
	}
	if err := c.HtoDAsync(p.xf, ptrOf(obs), 4*len(obs), l.stream); err != nil {
		return nil, err
	}
	if err := c.Launch(l.k.fn["cast_rows"], dim(ceilDiv(len(obs), 256)), dim(256), 0, l.stream, p.xf, p.x, int64(len(obs))); err != nil {
		return nil, err
	}
	for i := range fw {
		if err := fw[i].run(c, l.stream); err != nil {
			return nil, err
		}
	}
	lg, pr := cuda.DevPtr(0), cuda.DevPtr(0)
	if full {
		lg, pr = p.logits, p.probs
	}
	if err := c.Launch(l.k.fn["head_infer"], dim(headInferBlocks(rows)), dim(headInferThreads), 0, l.stream,
		p.a.o, int32(rows), l.z, lg, pr, p.q, p.act, l.margin); err != nil {
		return nil, err
	}
	return p, c.Sync(l.stream)
}

// greedy writes the online network's greedy action of every branch for rows
// observations (rollout.Greedy, with the learner's margin over flat),
// through the inference GEMMs: the host environment's path, which the
// device backtest is tested against.
func (l *learner) greedy(c *cuda.Ctx, obs []float32, rows int, dst []market.Action) error {
	if len(dst) != rows {
		return fmt.Errorf("greedy: dst has %d actions, want %d", len(dst), rows)
	}
	p, err := l.infer(c, obs, rows, false)
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

// headInferThreads is the block of head_infer (kernels/head.cu): four
// warps, each one (row, branch) pair; headInferBlocks is its grid for rows
// observations.
const headInferThreads = 128

func headInferBlocks(rows int) int { return ceilDiv(3*rows, headInferThreads/32) }
