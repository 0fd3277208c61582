package gpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// devCollector is the experience collector on the device: env.num_envs
// environments over the training range (kernels/env.cu), the online
// network's greedy actions through the inference GEMMs, ε-greedy
// exploration per branch, and n-step transitions written straight into the
// device replay ring. One collector step is one CUDA graph of
//
//	env_observe → the forward pass (fused, or four GEMMs) → head_infer → env_step →
//	env_commit_scan → env_commit
//
// replayed once per step; the tree's inner nodes are rebuilt once per
// Collect call and the counters read back once.
type devCollector struct {
	cfg config.RunConfig
	ds  *market.Dataset
	mk  *devMarket
	env *devEnv

	x                                  cuda.DevPtr // E [N×ObsDim]
	a                                  acts
	act                                cuda.DevPtr // int32 [N×3] greedy actions, or the actions given (tests)
	tcount, tbar, tagent, taction      cuda.DevPtr // staging of one step's finished transitions, [N×n(×…)]
	tret, tdisc, tnext, tnextAgent     cuda.DevPtr
	reward, pnl, nextAgent, done, took cuda.DevPtr // the step's results per env
	args                               cuda.DevPtr // struct EnvArgs

	observe, reset, step, scan, commit launch
	fwd                                []launch
	head                               launch
	graph                              cuda.GraphExec
	clock                              *deviceClock // TimeEpochs, TimeCollect
}

// newDevCollector builds the collector of a run on l (whose replay buffer
// must exist), with the first windows drawn from its window stream.
func newDevCollector(c *cuda.Ctx, l *learner, cfg config.RunConfig, ds *market.Dataset) (*devCollector, error) {
	n, ns := cfg.Env.NumEnvs, cfg.Optim.NStep
	if n < 1 || ns < 1 || cfg.EpsilonDecayEnvSteps() < 1 {
		return nil, fmt.Errorf("collector: env.num_envs = %d, optim.n_step = %d, epsilon schedule %d env steps: each must be at least 1 (validate the config first)",
			n, ns, cfg.EpsilonDecayEnvSteps())
	}
	eb := l.s.EnvBlock
	// The host environment's checks of the data over the training range
	// (lengths, finite prices and ATR, a usable instrument) and of the
	// reward shaping, with its errors.
	probe, err := sim.NewVecEnv(ds, ds.Train, 1, cfg.Env.EpisodeBars, rand.New(rand.NewPCG(cfg.Seed, rollout.StreamEnv)))
	if err != nil {
		return nil, err
	}
	if err := probe.SetReward(sim.ShapeOf(cfg.Env)); err != nil {
		return nil, fmt.Errorf("collector: env.reward_scale, env.turnover_penalty, env.risk_aversion: %w", err)
	}
	r := l.replay
	bt := l.mem.batch(c, l.stream)
	mk, err := newDevMarket(c, bt, ds, r.features)
	if err != nil {
		return nil, err
	}
	d := &devCollector{cfg: cfg, ds: ds, mk: mk, env: newDevEnv(bt, ds.Train, n, ns, cfg.Env.EpisodeBars)}
	rows := max(n, 64)
	d.x = bt.alloc(l.esz * rows * obsWidth)
	d.a = l.newActs(bt.alloc, rows)
	d.a.rows = n
	d.act = bt.alloc(4 * n * 3)
	k := n * ns
	d.tcount, d.tbar, d.tagent, d.taction = bt.alloc(4*n), bt.alloc(4*k), bt.alloc(4*k*agentW), bt.alloc(4*k*3)
	d.tret, d.tdisc, d.tnext, d.tnextAgent = bt.alloc(4*k), bt.alloc(4*k), bt.alloc(4*k), bt.alloc(4*k*agentW)
	d.reward, d.pnl, d.nextAgent, d.done, d.took = bt.alloc(4*n), bt.alloc(8*n), bt.alloc(4*n*agentW), bt.alloc(4*n), bt.alloc(4*n*3)
	commit := bt.alloc(8 * (2 + n))
	// The panel's segment table (struct EnvArgs' nseg, segFrom, segTo,
	// segCum); none for one series.
	var segFrom, segTo, segCum cuda.DevPtr
	segs := ds.Segments
	if len(segs) > 1 {
		segFrom, segTo, segCum = bt.alloc(8*len(segs)), bt.alloc(8*len(segs)), bt.alloc(8*len(segs))
	} else {
		segs = nil
	}
	if bt.err != nil {
		return nil, bt.err
	}
	var w words
	mk.words(&w)
	d.env.arrays(&w)
	w.ptr(d.env.ctr)
	w.i64(int64(n)).i64(int64(ds.Train.From)).i64(int64(ds.Train.To)).i64(int64(d.env.windowLen)).i64(int64(ns))
	w.f64(cfg.Optim.Gamma).f64(cfg.Env.RewardScale).f64(cfg.Env.TurnoverPenalty).f64(cfg.Env.RiskAversion)
	w.f64(cfg.Env.EpsilonStart).f64(cfg.Env.EpsilonEnd).i64(cfg.EpsilonDecayEnvSteps())
	w.i64(int64(streamKey(cfg.Seed, rollout.StreamEnv))).i64(int64(streamKey(cfg.Seed, rollout.StreamExplore)))
	w.ptr(d.act).ptr(d.x)
	w.ptr(d.tcount).ptr(d.tbar).ptr(d.tagent).ptr(d.taction).ptr(d.tret).ptr(d.tdisc).ptr(d.tnext).ptr(d.tnextAgent)
	w.ptr(d.reward).ptr(d.pnl).ptr(d.nextAgent).ptr(d.done).ptr(d.took)
	r.arrays(&w)
	w.i64(int64(r.capacity)).f64(r.cfg.Alpha)
	w.ptr(commit)
	w.i64(int64(len(segs))).ptr(segFrom).ptr(segTo).ptr(segCum)
	if len(w) != envArgsWords {
		return nil, fmt.Errorf("collector arguments: %d words, want %d", len(w), envArgsWords)
	}
	d.args = bt.alloc(8 * len(w))
	if bt.err != nil {
		return nil, bt.err
	}
	if err := cuda.Upload(c, d.args, []uint64(w)); err != nil {
		return nil, err
	}
	if segs != nil {
		from, to := make([]int64, len(segs)), make([]int64, len(segs))
		for k, sg := range segs {
			from[k], to[k] = int64(sg.From), int64(sg.To)
		}
		for _, err := range []error{cuda.Upload(c, segFrom, from), cuda.Upload(c, segTo, to), cuda.Upload(c, segCum, market.SegmentCumulative(segs))} {
			if err != nil {
				return nil, err
			}
		}
	}
	perEnv := dim(ceilDiv(n, eb))
	d.reset = launch{name: "env_reset", f: l.k.fn["env_reset"], grid: perEnv, block: dim(eb), args: []any{d.args}}
	d.observe = launch{name: "env_observe", f: l.k.fn["env_observe"], grid: dim(ceilDiv(n*obsWidth, 256)), block: dim(256), args: []any{d.args}}
	d.step = launch{name: "env_step", f: l.k.fn["env_step"], grid: perEnv, block: dim(eb), args: []any{d.args}}
	d.scan = launch{name: "env_commit_scan", f: l.k.fn["env_commit_scan"], grid: dim(1), block: dim(commitThreads), args: []any{d.args}}
	d.commit = launch{name: "env_commit", f: l.k.fn["env_commit"], grid: perEnv, block: dim(eb), args: []any{d.args, l.st}}
	// No step state: the collector's forward always runs.
	if d.fwd, err = l.forwardLaunches(c, "collect", []fwdNet{{&l.online, d.x, &d.a}}, 0); err != nil {
		return nil, err
	}
	d.head = launch{name: "head_infer", f: l.k.fn["head_infer"], grid: dim(headInferBlocks(n)), block: dim(headInferThreads),
		args: []any{d.a.o, int32(n), l.z, cuda.DevPtr(0), cuda.DevPtr(0), cuda.DevPtr(0), d.act, l.margin}}
	if err := d.reset.run(c, l.stream); err != nil {
		return nil, err
	}
	return d, c.Sync(l.stream)
}

// envArgsWords is the size of struct EnvArgs in 64-bit words.
const envArgsWords = 14 + 14 + 1 + 5 + 4 + 3 + 2 + 2 + 8 + 5 + 9 + 2 + 1 + 4

// The collector's one-thread-per-environment kernels (env_reset,
// env_step, env_commit) run in blocks of Tuning.EnvBlock threads, 64 by
// default. The kernels are chains of dependent loads and float64
// arithmetic, one thread per environment: small blocks spread them over
// more SMs, and so over more schedulers (the figures are on the field).

// commitThreads is COMMIT_THREADS of kernels/env.cu.
const commitThreads = 1024

// launches are one collector step: observe, forward, greedy head, step,
// commit (scan, then write).
func (d *devCollector) launches() []launch {
	out := []launch{d.observe}
	out = append(out, d.fwd...)
	return append(out, d.head, d.step, d.scan, d.commit)
}

// begin sets the counters of one Collect call: the replay ring's cursor
// and size (the host's mirror is the truth between calls), nothing added.
func (d *devCollector) begin(c *cuda.Ctx, r *devReplay) error {
	return cuda.Upload(c, d.env.ctr+8*ctrCursor, []int64{int64(r.cursor), int64(r.size), 0, 0, 0})
}

// finish rebuilds the tree's inner nodes and reads the counters back into
// the replay mirror and the call's statistics.
func (d *devCollector) finish(c *cuda.Ctx, l *learner, steps int) (trainer.CollectStats, error) {
	var st trainer.CollectStats
	r := l.replay
	if err := r.rebuild(c, l); err != nil {
		return st, err
	}
	if err := d.clock.end(c, l.stream, "collect"); err != nil {
		return st, err
	}
	if err := c.Sync(l.stream); err != nil {
		return st, err
	}
	ctr := make([]int64, ctrWords)
	if err := cuda.Download(c, ctr, d.env.ctr); err != nil {
		return st, err
	}
	r.cursor, r.size = int(ctr[ctrCursor]), int(ctr[ctrSize])
	st.EnvSteps = ctr[ctrEnvSteps]
	st.Transitions = int(ctr[ctrAdded])
	st.Episodes = int(ctr[ctrCallEpisodes])
	st.Epsilon = rollout.Epsilon(d.cfg, st.EnvSteps)
	st.BufferSize = r.size
	if steps > 0 {
		st.MeanReward = math.Float64frombits(uint64(ctr[ctrRewardSum])) / float64(steps*d.env.n)
	}
	return st, nil
}

// collect runs steps collector steps (rollout.Collector.Collect's
// contract, on the device). Cancelling ctx stops between steps; the
// transitions of the steps taken stay in the buffer.
func (d *devCollector) collect(ctx context.Context, c *cuda.Ctx, l *learner, steps int) (trainer.CollectStats, error) {
	if steps < 0 {
		return trainer.CollectStats{}, fmt.Errorf("collect: %d steps: must not be negative", steps)
	}
	if d.graph == 0 {
		if err := c.Sync(l.stream); err != nil {
			return trainer.CollectStats{}, err
		}
		g, err := capture(c, l.s.launch.dependent, l.stream, d.launches())
		if err != nil {
			return trainer.CollectStats{}, fmt.Errorf("collect: capture: %w", err)
		}
		d.graph = g
	}
	if err := d.begin(c, l.replay); err != nil {
		return trainer.CollectStats{}, err
	}
	if err := d.clock.begin(c, l.stream); err != nil {
		return trainer.CollectStats{}, err
	}
	done := 0
	var runErr error
	for ; done < steps; done++ {
		if runErr = ctx.Err(); runErr != nil {
			break
		}
		if runErr = c.GraphLaunch(d.graph, l.stream); runErr != nil {
			break
		}
	}
	st, err := d.finish(c, l, done)
	if runErr != nil {
		return st, runErr
	}
	return st, err
}

// stepGiven takes one step with the given actions (N×3: direction, size,
// exit) instead of the network's, with the config's ε: the equivalence
// test's entry point.
func (d *devCollector) stepGiven(c *cuda.Ctx, l *learner, actions []int32) error {
	if len(actions) != 3*d.env.n {
		return fmt.Errorf("step: %d action values for %d environments", len(actions), d.env.n)
	}
	if err := cuda.Upload(c, d.act, actions); err != nil {
		return err
	}
	for _, ln := range []launch{d.step, d.scan, d.commit} {
		if err := ln.run(c, l.stream); err != nil {
			return err
		}
	}
	return c.Sync(l.stream)
}

// stepResult downloads the last step's results in sim.StepResult form
// (NextBar is not kept on the device) and the actions taken.
func (d *devCollector) stepResult(c *cuda.Ctx) (sim.StepResult, []int32, error) {
	n := d.env.n
	res := sim.StepResult{Reward: make([]float32, n), PnL: make([]float64, n), NextAgent: make([]float32, n*agentW), Done: make([]bool, n)}
	done, took := make([]int32, n), make([]int32, 3*n)
	for _, err := range []error{cuda.Download(c, res.Reward, d.reward), cuda.Download(c, res.PnL, d.pnl),
		cuda.Download(c, res.NextAgent, d.nextAgent), cuda.Download(c, done, d.done), cuda.Download(c, took, d.took)} {
		if err != nil {
			return res, nil, err
		}
	}
	for i, v := range done {
		res.Done[i] = v != 0
		if v != 0 {
			res.Episodes++
		}
	}
	return res, took, nil
}

// tensors returns the collector's checkpoint tensors, in the CPU
// collector's names and layout (rollout.State.Tensors).
func (d *devCollector) tensors(c *cuda.Ctx, l *learner) ([]checkpoint.Tensor, error) {
	if err := c.Sync(l.stream); err != nil {
		return nil, err
	}
	s, err := d.env.state(c)
	if err != nil {
		return nil, err
	}
	if err := deviceStreams(d.cfg, &s); err != nil {
		return nil, err
	}
	return s.Tensors(), nil
}

// load replaces the collector's state with ck's collector tensors (from a
// checkpoint of either backend); it checks everything first and changes
// nothing on error, naming the tensor or field. The PCG states of a CPU
// checkpoint are not used: the device streams continue from the step
// count.
func (d *devCollector) load(c *cuda.Ctx, l *learner, ck *checkpoint.Checkpoint) error {
	s, err := rollout.ReadState(ck, d.env.n, d.env.nstep)
	if err != nil {
		return err
	}
	if err := d.env.check(d.ds, s); err != nil {
		return err
	}
	if err := c.Sync(l.stream); err != nil {
		return err
	}
	return d.env.setState(c, s)
}

func (d *devCollector) free(c *cuda.Ctx) error {
	if d.graph != 0 {
		err := c.DestroyGraphExec(d.graph)
		d.graph = 0
		return err
	}
	return nil
}
