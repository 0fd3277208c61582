package devenv

import (
	"context"
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/step"
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

// Collector is the experience collector on the device: env.num_envs
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
type Collector struct {
	cfg config.RunConfig
	ds  *market.Dataset
	Mk  *devMarket
	Env *devEnv

	x                                  cuda.DevPtr // E [N×ObsDim]
	a                                  step.Acts
	act                                cuda.DevPtr // int32 [N×3] greedy actions, or the actions given (tests)
	tcount, tbar, tagent, taction      cuda.DevPtr // staging of one step's finished transitions, [N×n(×…)]
	tret, tdisc, tnext, tnextAgent     cuda.DevPtr
	reward, pnl, nextAgent, done, took cuda.DevPtr // the step's results per env
	args                               cuda.DevPtr // struct EnvArgs

	observe, reset, step, scan, commit device.Launch
	fwd                                []device.Launch
	head                               device.Launch
	graph                              cuda.GraphExec
	Clock                              *device.Clock // TimeEpochs, TimeCollect
}

// NewCollector builds the collector of a run on l (whose replay buffer
// must exist), with the first windows drawn from its window stream.
func NewCollector(c *cuda.Ctx, l *step.Learner, cfg config.RunConfig, ds *market.Dataset) (*Collector, error) {
	n, ns := cfg.Env.NumEnvs, cfg.Optim.NStep
	if n < 1 || ns < 1 || cfg.EpsilonDecayEnvSteps() < 1 {
		return nil, fmt.Errorf("collector: env.num_envs = %d, optim.n_step = %d, epsilon schedule %d env steps: each must be at least 1 (validate the config first)",
			n, ns, cfg.EpsilonDecayEnvSteps())
	}
	eb := l.S.EnvBlock
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
	r := l.Replay
	bt := l.Mem.Batch(c, l.Stream)
	mk, err := newDevMarket(c, bt, ds, r.Features)
	if err != nil {
		return nil, err
	}
	d := &Collector{cfg: cfg, ds: ds, Mk: mk, Env: newDevEnv(bt, ds.Train, n, ns, cfg.Env.EpisodeBars)}
	rows := max(n, 64)
	d.x = bt.Alloc(l.ESize * rows * step.ObsWidth)
	d.a = l.NewActs(bt.Alloc, rows)
	d.a.Rows = n
	d.act = bt.Alloc(4 * n * 3)
	k := n * ns
	d.tcount, d.tbar, d.tagent, d.taction = bt.Alloc(4*n), bt.Alloc(4*k), bt.Alloc(4*k*step.AgentW), bt.Alloc(4*k*3)
	d.tret, d.tdisc, d.tnext, d.tnextAgent = bt.Alloc(4*k), bt.Alloc(4*k), bt.Alloc(4*k), bt.Alloc(4*k*step.AgentW)
	d.reward, d.pnl, d.nextAgent, d.done, d.took = bt.Alloc(4*n), bt.Alloc(8*n), bt.Alloc(4*n*step.AgentW), bt.Alloc(4*n), bt.Alloc(4*n*3)
	commit := bt.Alloc(8 * (2 + n))
	// The panel's segment table (struct EnvArgs' nseg, segFrom, segTo,
	// segCum); none for one series.
	var segFrom, segTo, segCum cuda.DevPtr
	segs := ds.Segments
	if len(segs) > 1 {
		segFrom, segTo, segCum = bt.Alloc(8*len(segs)), bt.Alloc(8*len(segs)), bt.Alloc(8*len(segs))
	} else {
		segs = nil
	}
	if bt.Err != nil {
		return nil, bt.Err
	}
	var w device.Words
	mk.words(&w)
	d.Env.arrays(&w)
	w.Ptr(d.Env.ctr)
	w.I64(int64(n)).I64(int64(ds.Train.From)).I64(int64(ds.Train.To)).I64(int64(d.Env.WindowLen)).I64(int64(ns))
	w.F64(cfg.Optim.Gamma).F64(cfg.Env.RewardScale).F64(cfg.Env.TurnoverPenalty).F64(cfg.Env.RiskAversion)
	w.F64(cfg.Env.EpsilonStart).F64(cfg.Env.EpsilonEnd).I64(cfg.EpsilonDecayEnvSteps())
	w.I64(int64(StreamKey(cfg.Seed, rollout.StreamEnv))).I64(int64(StreamKey(cfg.Seed, rollout.StreamExplore)))
	w.Ptr(d.act).Ptr(d.x)
	w.Ptr(d.tcount).Ptr(d.tbar).Ptr(d.tagent).Ptr(d.taction).Ptr(d.tret).Ptr(d.tdisc).Ptr(d.tnext).Ptr(d.tnextAgent)
	w.Ptr(d.reward).Ptr(d.pnl).Ptr(d.nextAgent).Ptr(d.done).Ptr(d.took)
	r.Arrays(&w)
	w.I64(int64(r.Capacity)).F64(r.Cfg.Alpha)
	w.Ptr(commit)
	w.I64(int64(len(segs))).Ptr(segFrom).Ptr(segTo).Ptr(segCum)
	if len(w) != envArgsWords {
		return nil, fmt.Errorf("collector arguments: %d words, want %d", len(w), envArgsWords)
	}
	d.args = bt.Alloc(8 * len(w))
	if bt.Err != nil {
		return nil, bt.Err
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
	perEnv := device.Dim(device.CeilDiv(n, eb))
	d.reset = device.Launch{Name: "env_reset", F: l.K.Fn["env_reset"], Grid: perEnv, Block: device.Dim(eb), Args: []any{d.args}}
	d.observe = device.Launch{Name: "env_observe", F: l.K.Fn["env_observe"], Grid: device.Dim(device.CeilDiv(n*step.ObsWidth, 256)), Block: device.Dim(256), Args: []any{d.args}}
	d.step = device.Launch{Name: "env_step", F: l.K.Fn["env_step"], Grid: perEnv, Block: device.Dim(eb), Args: []any{d.args}}
	d.scan = device.Launch{Name: "env_commit_scan", F: l.K.Fn["env_commit_scan"], Grid: device.Dim(1), Block: device.Dim(commitThreads), Args: []any{d.args}}
	d.commit = device.Launch{Name: "env_commit", F: l.K.Fn["env_commit"], Grid: perEnv, Block: device.Dim(eb), Args: []any{d.args, l.St}}
	// No step state: the collector's forward always runs.
	if d.fwd, err = l.ForwardLaunches(c, "collect", []step.FwdNet{{Net: &l.Online, X: d.x, A: &d.a}}, 0); err != nil {
		return nil, err
	}
	d.head = device.Launch{Name: "head_infer", F: l.K.Fn["head_infer"], Grid: device.Dim(step.HeadInferBlocks(n)), Block: device.Dim(step.HeadInferThreads),
		Args: []any{d.a.O, int32(n), l.Z, cuda.DevPtr(0), cuda.DevPtr(0), cuda.DevPtr(0), d.act, l.Margin}}
	if err := d.reset.Run(c, l.Stream); err != nil {
		return nil, err
	}
	return d, c.Sync(l.Stream)
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

// Launches are one collector step: observe, forward, greedy head, step,
// commit (scan, then write).
func (d *Collector) Launches() []device.Launch {
	out := []device.Launch{d.observe}
	out = append(out, d.fwd...)
	return append(out, d.head, d.step, d.scan, d.commit)
}

// Begin sets the counters of one Collect call: the replay ring's cursor
// and size (the host's mirror is the truth between calls), nothing added.
func (d *Collector) Begin(c *cuda.Ctx, r *step.Replay) error {
	return cuda.Upload(c, d.Env.ctr+8*ctrCursor, []int64{int64(r.Cursor), int64(r.Size), 0, 0, 0})
}

// Finish rebuilds the tree's inner nodes and reads the counters back into
// the replay mirror and the call's statistics.
func (d *Collector) Finish(c *cuda.Ctx, l *step.Learner, steps int) (trainer.CollectStats, error) {
	var st trainer.CollectStats
	r := l.Replay
	if err := r.Rebuild(c, l); err != nil {
		return st, err
	}
	if err := d.Clock.End(c, l.Stream, "collect"); err != nil {
		return st, err
	}
	if err := c.Sync(l.Stream); err != nil {
		return st, err
	}
	ctr := make([]int64, ctrWords)
	if err := cuda.Download(c, ctr, d.Env.ctr); err != nil {
		return st, err
	}
	r.Cursor, r.Size = int(ctr[ctrCursor]), int(ctr[ctrSize])
	st.EnvSteps = ctr[ctrEnvSteps]
	st.Transitions = int(ctr[ctrAdded])
	st.Episodes = int(ctr[ctrCallEpisodes])
	st.Epsilon = rollout.Epsilon(d.cfg, st.EnvSteps)
	st.BufferSize = r.Size
	if steps > 0 {
		st.MeanReward = math.Float64frombits(uint64(ctr[ctrRewardSum])) / float64(steps*d.Env.n)
	}
	return st, nil
}

// Collect runs steps collector steps (rollout.Collector.Collect's
// contract, on the device). Cancelling ctx stops between steps; the
// transitions of the steps taken stay in the buffer.
func (d *Collector) Collect(ctx context.Context, c *cuda.Ctx, l *step.Learner, steps int) (trainer.CollectStats, error) {
	if steps < 0 {
		return trainer.CollectStats{}, fmt.Errorf("collect: %d steps: must not be negative", steps)
	}
	if d.graph == 0 {
		if err := c.Sync(l.Stream); err != nil {
			return trainer.CollectStats{}, err
		}
		g, err := device.Capture(c, l.S.Launch.Dependent, l.Stream, d.Launches())
		if err != nil {
			return trainer.CollectStats{}, fmt.Errorf("collect: capture: %w", err)
		}
		d.graph = g
	}
	if err := d.Begin(c, l.Replay); err != nil {
		return trainer.CollectStats{}, err
	}
	if err := d.Clock.Begin(c, l.Stream); err != nil {
		return trainer.CollectStats{}, err
	}
	done := 0
	var runErr error
	for ; done < steps; done++ {
		if runErr = ctx.Err(); runErr != nil {
			break
		}
		if runErr = c.GraphLaunch(d.graph, l.Stream); runErr != nil {
			break
		}
	}
	st, err := d.Finish(c, l, done)
	if runErr != nil {
		return st, runErr
	}
	return st, err
}

// StepGiven takes one step with the given actions (N×3: direction, size,
// exit) instead of the network's, with the config's ε: the equivalence
// test's entry point.
func (d *Collector) StepGiven(c *cuda.Ctx, l *step.Learner, actions []int32) error {
	if len(actions) != 3*d.Env.n {
		return fmt.Errorf("step: %d action values for %d environments", len(actions), d.Env.n)
	}
	if err := cuda.Upload(c, d.act, actions); err != nil {
		return err
	}
	for _, ln := range []device.Launch{d.step, d.scan, d.commit} {
		if err := ln.Run(c, l.Stream); err != nil {
			return err
		}
	}
	return c.Sync(l.Stream)
}

// StepResult downloads the last step's results in sim.StepResult form
// (NextBar is not kept on the device) and the actions taken.
func (d *Collector) StepResult(c *cuda.Ctx) (sim.StepResult, []int32, error) {
	n := d.Env.n
	res := sim.StepResult{Reward: make([]float32, n), PnL: make([]float64, n), NextAgent: make([]float32, n*step.AgentW), Done: make([]bool, n)}
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

// Tensors returns the collector's checkpoint tensors, in the CPU
// collector's names and layout (rollout.State.Tensors).
func (d *Collector) Tensors(c *cuda.Ctx, l *step.Learner) ([]checkpoint.Tensor, error) {
	if err := c.Sync(l.Stream); err != nil {
		return nil, err
	}
	s, err := d.Env.State(c)
	if err != nil {
		return nil, err
	}
	if err := deviceStreams(d.cfg, &s); err != nil {
		return nil, err
	}
	return s.Tensors(), nil
}

// Load replaces the collector's state with ck's collector tensors (from a
// checkpoint of either backend); it checks everything first and changes
// nothing on error, naming the tensor or field. The PCG states of a CPU
// checkpoint are not used: the device streams continue from the step
// count.
func (d *Collector) Load(c *cuda.Ctx, l *step.Learner, ck *checkpoint.Checkpoint) error {
	s, err := rollout.ReadState(ck, d.Env.n, d.Env.nstep)
	if err != nil {
		return err
	}
	if err := d.Env.check(d.ds, s); err != nil {
		return err
	}
	if err := c.Sync(l.Stream); err != nil {
		return err
	}
	return d.Env.setState(c, s)
}

func (d *Collector) Free(c *cuda.Ctx) error {
	if d.graph != 0 {
		err := c.DestroyGraphExec(d.graph)
		d.graph = 0
		return err
	}
	return nil
}
