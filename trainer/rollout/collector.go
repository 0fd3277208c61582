package rollout

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/replay"
	"github.com/dqnflow/dqnflow/trainer"
)

// Random streams of a Collector: rand.NewPCG(cfg.Seed, stream) each, so the
// streams are independent and each is checkpointed on its own. A backend's
// own streams (the CPU backend's replay sampling, 0x736d70) use other
// values.
const (
	StreamEnv     = 0x656e76 // "env": episode window starts
	StreamExplore = 0x657870 // "exp": epsilon-greedy draws
)

// Greedy writes, for each of the rows observations in obs (rows×ObsDim),
// the action that maximises the online network's expected Q on every
// branch (the first one on ties) to dst (rows actions).
type Greedy func(obs []float32, rows int, dst []market.Action) error

// Sink receives the finished n-step transitions, in order. *replay.Buffer
// is one; a device-resident buffer may stage them for one upload per
// Collect call.
type Sink interface {
	Add(replay.Transition) error
}

// Collector steps cfg.Env.NumEnvs environments over the training range of
// a dataset with an epsilon-greedy policy and turns their steps into
// n-step transitions. Methods are not safe for concurrent use.
type Collector struct {
	cfg config.RunConfig

	env   *sim.VecEnv
	nstep *nstep

	envPCG, explorePCG *rand.PCG
	exploreRNG         *rand.Rand

	envSteps int64 // environment steps taken, summed over environments

	// scratch, sized once
	obs  []float32
	acts []market.Action
	bars []int32 // decision bar of each env before a step
	step sim.StepResult
}

// New builds the collector of a run in its initial state: environments at
// their first windows over the training range of ds.TrainingSet() (drawn
// from the env stream), no pending steps, no steps taken; the bars of the
// transitions it writes index that dataset. cfg must be valid
// (config.Validate).
func New(cfg config.RunConfig, ds *market.Dataset) (*Collector, error) {
	if ds == nil {
		return nil, fmt.Errorf("rollout: nil dataset")
	}
	if cfg.Env.NumEnvs < 1 || cfg.Optim.NStep < 1 || cfg.EpsilonDecayEnvSteps() < 1 {
		return nil, fmt.Errorf("rollout: env.num_envs = %d, optim.n_step = %d, epsilon schedule %d env steps: each must be at least 1 (validate the config first)",
			cfg.Env.NumEnvs, cfg.Optim.NStep, cfg.EpsilonDecayEnvSteps())
	}
	c := &Collector{
		cfg:        cfg,
		envPCG:     rand.NewPCG(cfg.Seed, StreamEnv),
		explorePCG: rand.NewPCG(cfg.Seed, StreamExplore),
	}
	c.exploreRNG = rand.New(c.explorePCG)
	var err error
	ts := ds.TrainingSet()
	if c.env, err = sim.NewVecEnv(ts, ts.Train, cfg.Env.NumEnvs, cfg.Env.EpisodeBars, rand.New(c.envPCG)); err != nil {
		return nil, err
	}
	if err := c.env.SetReward(sim.ShapeOf(cfg.Env)); err != nil {
		return nil, fmt.Errorf("rollout: env.reward_scale, env.turnover_penalty, env.risk_aversion: %w", err)
	}
	n := cfg.Env.NumEnvs
	c.nstep = newNStep(n, cfg.Optim.NStep, cfg.Optim.Gamma)
	c.obs = make([]float32, n*market.ObsDim)
	c.acts = make([]market.Action, n)
	c.bars = make([]int32, n)
	return c, nil
}

// EnvSteps is the number of environment steps taken since the run began,
// summed over environments; it drives the epsilon schedule.
func (c *Collector) EnvSteps() int64 { return c.envSteps }

// Epsilon is the exploration rate of the next step.
func (c *Collector) Epsilon() float64 { return c.epsilon(c.envSteps) }

// NumEnvs is the number of parallel environments, the rows of every
// Greedy call.
func (c *Collector) NumEnvs() int { return c.env.N() }

// epsilon is the exploration rate after s environment steps: linear from
// epsilon_start to epsilon_end over config.RunConfig.EpsilonDecayEnvSteps
// (a fraction of the run's environment steps, or epsilon_decay_steps),
// then constant.
func (c *Collector) epsilon(s int64) float64 { return Epsilon(c.cfg, s) }

// Epsilon is the exploration rate of cfg's schedule after s environment
// steps, ε_start + min(s/decay, 1)·(ε_end − ε_start) in float64, the
// formula every collector (the CPU's and the CUDA backend's) uses.
func Epsilon(cfg config.RunConfig, s int64) float64 {
	e := cfg.Env
	f := math.Min(float64(s)/float64(cfg.EpsilonDecayEnvSteps()), 1)
	return e.EpsilonStart + f*(e.EpsilonEnd-e.EpsilonStart)
}

// Collect runs steps environment steps in every environment and adds the
// n-step transitions they complete to sink. Each step, when epsilon < 1,
// greedy picks the action of every branch for all environments at once;
// each branch is then replaced, with probability epsilon, by a uniform
// random action (one uniform draw per env and branch, in env-then-branch
// order, whether or not it explores, then one IntN draw when it does).
//
// The returned stats have every field but BufferSize, which the caller
// fills from its own buffer (a Sink need not know its length).
func (c *Collector) Collect(ctx context.Context, steps int, greedy Greedy, sink Sink) (trainer.CollectStats, error) {
	var st trainer.CollectStats
	if steps < 0 {
		return st, fmt.Errorf("collect: %d steps: must not be negative", steps)
	}
	if greedy == nil || sink == nil {
		return st, fmt.Errorf("collect: nil greedy policy or sink")
	}
	n := c.env.N()
	var rewardSum float64
	added := 0
	for s := 0; s < steps; s++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		eps := c.epsilon(c.envSteps)
		if err := c.env.Observe(c.obs); err != nil {
			return st, err
		}
		if eps < 1 {
			if err := greedy(c.obs, n, c.acts); err != nil {
				return st, err
			}
		}
		for i := range c.acts {
			a := &c.acts[i]
			for br, k := range market.BranchSizes {
				u := c.exploreRNG.Float64()
				if u < eps {
					r := c.exploreRNG.IntN(k)
					switch br {
					case 0:
						a.Dir = r
					case 1:
						a.Size = r
					default:
						a.Exit = r
					}
				}
			}
		}
		for i := range c.bars {
			c.bars[i] = int32(c.env.Bar(i))
		}
		if err := c.env.Step(c.acts, &c.step); err != nil {
			return st, err
		}
		for i := 0; i < n; i++ {
			agent := c.obs[i*market.ObsDim+market.NumFeatures : (i+1)*market.ObsDim]
			rewardSum += float64(c.step.Reward[i])
			k, err := c.nstep.push(sink, i, c.bars[i], agent, c.acts[i], c.step.Reward[i],
				c.step.NextBar[i], c.step.NextAgent[i*market.NumAgentFeatures:(i+1)*market.NumAgentFeatures], c.step.Done[i])
			if err != nil {
				return st, err
			}
			added += k
		}
		st.Episodes += c.step.Episodes
		c.envSteps += int64(n)
	}
	st.EnvSteps = c.envSteps
	st.Transitions = added
	st.Epsilon = c.epsilon(c.envSteps)
	if steps > 0 {
		st.MeanReward = rewardSum / float64(steps*n)
	}
	return st, nil
}
