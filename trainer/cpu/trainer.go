package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/replay"
	"github.com/dqnflow/dqnflow/trainer"
)

// Backend is the CPU reference backend of trainer.Backend.
type Backend struct{}

// Random streams of a run. Each is a PCG seeded with (cfg.Seed, stream), so
// the streams are independent and each is checkpointed on its own.
const (
	streamEnv     = 0x656e76 // "env": episode window starts
	streamExplore = 0x657870 // "exp": epsilon-greedy draws
	streamSample  = 0x736d70 // "smp": replay sampling
)

// Trainer is the CPU reference trainer: a Learner, a vectorised
// environment over the training range, a prioritised replay buffer with
// n-step returns, and three random streams. Everything it computes is
// deterministic for a config and seed, so Snapshot and Restore resume a run
// bit for bit.
type Trainer struct {
	cfg config.RunConfig
	ds  *market.Dataset

	learner *Learner
	env     *market.VecEnv
	buf     *replay.Buffer
	nstep   *nstep

	envPCG, explorePCG, samplePCG *rand.PCG
	exploreRNG, sampleRNG         *rand.Rand

	envSteps int64 // environment steps taken, summed over environments
	closed   bool

	// scratch, sized once
	obs   []float32
	acts  []market.Action
	bars  []int32 // decision bar of each env before a step
	step  market.StepResult
	rb    *replay.Batch
	idx   []int
	w     []float32
	batch Batch
}

// New builds a trainer for cfg on ds; see trainer.Backend.
func (Backend) New(_ context.Context, cfg config.RunConfig, ds *market.Dataset, warm *checkpoint.Checkpoint) (trainer.Trainer, error) {
	t, err := build(cfg, ds)
	if err != nil {
		return nil, err
	}
	if warm != nil {
		if err := t.warmStart(warm); err != nil {
			return nil, fmt.Errorf("warm start: %w", err)
		}
	}
	return t, nil
}

// build makes a trainer in its initial state: fresh weights from the seed,
// an empty replay buffer and environments at their first windows.
func build(cfg config.RunConfig, ds *market.Dataset) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ds == nil {
		return nil, fmt.Errorf("cpu trainer: nil dataset")
	}
	if cfg.Device != "cpu" && cfg.Device != "auto" {
		return nil, fmt.Errorf("cpu trainer: config device %q: this worker runs the cpu backend: %w; set device to \"cpu\" or \"auto\", or run it on a CUDA worker",
			cfg.Device, trainer.ErrUnsupported)
	}
	l, err := NewLearner(cfg.Model, cfg.Optim, cfg.Precision, cfg.Seed)
	if err != nil {
		return nil, err
	}
	buf, err := replay.New(cfg.Replay)
	if err != nil {
		return nil, err
	}
	t := &Trainer{
		cfg: cfg, ds: ds, learner: l, buf: buf,
		envPCG:     rand.NewPCG(cfg.Seed, streamEnv),
		explorePCG: rand.NewPCG(cfg.Seed, streamExplore),
		samplePCG:  rand.NewPCG(cfg.Seed, streamSample),
	}
	t.exploreRNG, t.sampleRNG = rand.New(t.explorePCG), rand.New(t.samplePCG)
	if t.env, err = market.NewVecEnv(ds, ds.Train, cfg.Env.NumEnvs, cfg.Env.EpisodeBars, rand.New(t.envPCG)); err != nil {
		return nil, err
	}
	t.nstep = newNStep(cfg.Env.NumEnvs, cfg.Optim.NStep, cfg.Optim.Gamma)
	n, b := cfg.Env.NumEnvs, cfg.BatchSize
	t.obs = make([]float32, n*market.ObsDim)
	t.acts = make([]market.Action, n)
	t.bars = make([]int32, n)
	t.rb = replay.NewBatch(b)
	t.idx, t.w = make([]int, b), make([]float32, b)
	t.batch = Batch{
		Obs: make([]float32, b*market.ObsDim), NextObs: make([]float32, b*market.ObsDim),
		Actions: t.rb.Action, Return: t.rb.Return, Discount: t.rb.Discount, Weight: t.w,
	}
	return t, nil
}

// Info reports the CPU backend and the precision that runs.
func (t *Trainer) Info() trainer.Info {
	storage := "f32"
	if t.cfg.Precision != config.PrecisionFP32 {
		storage = "bf16"
	}
	return trainer.Info{
		Backend: "cpu", Device: fmt.Sprintf("cpu (%d threads, %s/%s)", runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH),
		Precision: t.learner.Online().Precision(), StorageDType: storage, ComputeDType: "f32",
		Parameters: t.learner.NumParams(),
	}
}

func (t *Trainer) usable() error {
	if t.closed {
		return fmt.Errorf("cpu trainer: used after Close")
	}
	return nil
}

// epsilon is the exploration rate after s environment steps: linear from
// epsilon_start to epsilon_end over epsilon_decay_steps, then constant.
func (t *Trainer) epsilon(s int64) float64 {
	e := t.cfg.Env
	f := math.Min(float64(s)/float64(e.EpsilonDecaySteps), 1)
	return e.EpsilonStart + f*(e.EpsilonEnd-e.EpsilonStart)
}

// Collect runs steps environment steps in every environment. Each step the
// online network picks the greedy action of every branch; each branch is
// then replaced, with probability epsilon, by a uniform random action (one
// uniform draw per env and branch, in env-then-branch order, whether or
// not it explores, so the stream advances the same way every step).
func (t *Trainer) Collect(ctx context.Context, steps int) (trainer.CollectStats, error) {
	var st trainer.CollectStats
	if err := t.usable(); err != nil {
		return st, err
	}
	if steps < 0 {
		return st, fmt.Errorf("collect: %d steps: must not be negative", steps)
	}
	n := t.env.N()
	var rewardSum float64
	added := 0
	for s := 0; s < steps; s++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		eps := t.epsilon(t.envSteps)
		if err := t.env.Observe(t.obs); err != nil {
			return st, err
		}
		if eps < 1 {
			if err := t.learner.Greedy(t.obs, n, t.acts); err != nil {
				return st, err
			}
		}
		for i := range t.acts {
			a := &t.acts[i]
			for br, k := range market.BranchSizes {
				u := t.exploreRNG.Float64()
				if u < eps {
					r := t.exploreRNG.IntN(k)
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
		for i := range t.bars {
			t.bars[i] = int32(t.env.Bar(i))
		}
		if err := t.env.Step(t.acts, &t.step); err != nil {
			return st, err
		}
		for i := 0; i < n; i++ {
			agent := t.obs[i*market.ObsDim+market.NumFeatures : (i+1)*market.ObsDim]
			rewardSum += float64(t.step.Reward[i])
			k, err := t.nstep.push(t.buf, i, t.bars[i], agent, t.acts[i], t.step.Reward[i],
				t.step.NextBar[i], t.step.NextAgent[i*market.NumAgentFeatures:(i+1)*market.NumAgentFeatures], t.step.Done[i])
			if err != nil {
				return st, err
			}
			added += k
		}
		st.Episodes += t.step.Episodes
		t.envSteps += int64(n)
	}
	st.EnvSteps = t.envSteps
	st.Transitions = added
	st.BufferSize = t.buf.Len()
	st.Epsilon = t.epsilon(t.envSteps)
	if steps > 0 {
		st.MeanReward = rewardSum / float64(steps*n)
	}
	return st, nil
}

// Train runs steps gradient steps. When the replay buffer holds fewer than
// replay.warmup transitions it first collects until it does.
func (t *Trainer) Train(ctx context.Context, steps int, progress func(trainer.Progress)) (trainer.TrainStats, error) {
	var st trainer.TrainStats
	if err := t.usable(); err != nil {
		return st, err
	}
	if steps < 0 {
		return st, fmt.Errorf("train: %d steps: must not be negative", steps)
	}
	for t.buf.Len() < t.cfg.Replay.Warmup {
		if _, err := t.Collect(ctx, 1); err != nil {
			return st, fmt.Errorf("train: warm-up collection: %w", err)
		}
	}
	every := max(1, steps/100)
	var lossSum, normSum, repLoss, repNorm float64
	repN := 0
	for s := 1; s <= steps; s++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		res, err := t.gradientStep()
		if err != nil {
			return st, fmt.Errorf("train: global step %d: %w", t.learner.Steps()+1, err)
		}
		lossSum += res.Loss
		normSum += res.GradNorm
		repLoss += res.Loss
		repNorm += res.GradNorm
		repN++
		if progress != nil && (s%every == 0 || s == steps) {
			progress(trainer.Progress{
				Step: s, Steps: steps, GlobalStep: t.learner.Steps(),
				Loss: repLoss / float64(repN), GradNorm: repNorm / float64(repN),
			})
			repLoss, repNorm, repN = 0, 0, 0
		}
	}
	st.Steps = steps
	st.GlobalStep = t.learner.Steps()
	if steps > 0 {
		st.Loss, st.GradNorm = lossSum/float64(steps), normSum/float64(steps)
	}
	return st, nil
}

// gradientStep samples a batch with importance weights (β annealed by the
// global step), rebuilds its observations from the dataset, runs one
// learner step and writes the new priorities back.
func (t *Trainer) gradientStep() (StepResult, error) {
	beta := replay.Beta(t.cfg.Replay.Beta0, int(t.learner.Steps()), t.cfg.Replay.BetaSteps)
	if err := t.buf.Sample(t.sampleRNG, t.cfg.BatchSize, beta, t.idx, t.w); err != nil {
		return StepResult{}, err
	}
	if err := t.buf.Gather(t.idx, t.rb); err != nil {
		return StepResult{}, err
	}
	const na = market.NumAgentFeatures
	for j := range t.cfg.BatchSize {
		t.ds.Obs(int(t.rb.Bar[j]), t.rb.Agent[j*na:(j+1)*na], t.batch.Obs[j*market.ObsDim:(j+1)*market.ObsDim])
		t.ds.Obs(int(t.rb.NextBar[j]), t.rb.NextAgent[j*na:(j+1)*na], t.batch.NextObs[j*market.ObsDim:(j+1)*market.ObsDim])
	}
	res, err := t.learner.Step(&t.batch)
	if err != nil {
		return res, err
	}
	return res, t.buf.UpdatePriorities(t.idx, res.PerSample)
}

// SyncTarget applies target ← τ·online + (1−τ)·target, τ = optim.target_tau.
func (t *Trainer) SyncTarget() error {
	if err := t.usable(); err != nil {
		return err
	}
	return t.learner.SyncTarget(t.cfg.Optim.TargetTau)
}

// Backtest runs the online network's greedy policy over bars r of ds.
func (t *Trainer) Backtest(ctx context.Context, ds *market.Dataset, r market.Range) (market.Report, error) {
	if err := t.usable(); err != nil {
		return market.Report{}, err
	}
	rep, err := (&Policy{net: t.learner.Online()}).Backtest(ds, r)
	if err == nil {
		err = ctx.Err()
	}
	return rep, err
}

// Close releases the trainer; later calls return an error.
func (t *Trainer) Close() error {
	t.closed = true
	t.learner, t.buf, t.env = nil, nil, nil
	return nil
}
