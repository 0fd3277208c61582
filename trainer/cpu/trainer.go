package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"

	"github.com/dqnflow/dqnflow/blas"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/replay"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// Backend is the CPU reference backend of trainer.Backend.
type Backend struct{}

// streamSample is the random stream of replay sampling,
// rand.NewPCG(cfg.Seed, streamSample), beside the collector's
// (rollout.StreamEnv, rollout.StreamExplore).
const streamSample = 0x736d70 // "smp"

// Trainer is the CPU reference trainer: a Learner, the collector of
// trainer/rollout (vectorised environments, exploration, n-step returns),
// a prioritised replay buffer, and the replay sampling stream. Everything
// it computes is deterministic for a config and seed, so Snapshot and
// Restore resume a run bit for bit.
type Trainer struct {
	cfg config.RunConfig
	ds  *market.Dataset

	learner   *Learner
	collector *rollout.Collector
	buf       *replay.Buffer

	samplePCG *rand.PCG
	sampleRNG *rand.Rand

	closed bool

	// scratch, sized once
	rb    *replay.Batch
	idx   []int
	w     []float32
	batch model.Batch
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
	lib, err := blas.Open(cfg.BLAS, 0)
	if err != nil {
		return nil, fmt.Errorf("cpu trainer: config blas %q cannot run on this worker (%w): %w", cfg.BLAS, trainer.ErrUnsupported, err)
	}
	l, err := NewLearner(cfg.Model, cfg.Optim, cfg.Precision, cfg.Seed)
	if err != nil {
		return nil, err
	}
	l.SetBLAS(lib)
	if err := l.Online().SetGreedyMargin(cfg.GreedyMargin()); err != nil {
		return nil, fmt.Errorf("cpu trainer: env.flat_margin: %w", err)
	}
	buf, err := replay.New(cfg.Replay)
	if err != nil {
		return nil, err
	}
	col, err := rollout.New(cfg, ds)
	if err != nil {
		return nil, err
	}
	t := &Trainer{
		cfg: cfg, ds: ds.TrainingSet(), learner: l, collector: col, buf: buf,
		samplePCG: rand.NewPCG(cfg.Seed, streamSample),
	}
	t.sampleRNG = rand.New(t.samplePCG)
	b := cfg.BatchSize
	t.rb = replay.NewBatch(b)
	t.idx, t.w = make([]int, b), make([]float32, b)
	t.batch = model.Batch{
		Obs: make([]float32, b*market.ObsDim), NextObs: make([]float32, b*market.ObsDim),
		Actions: t.rb.Action, Return: t.rb.Return, Discount: t.rb.Discount, Weight: t.w,
	}
	return t, nil
}

// Info reports the CPU backend, the BLAS its GEMMs run on with its thread
// count, and the precision that runs.
func (t *Trainer) Info() trainer.Info {
	storage := "f32"
	if t.cfg.Precision != config.PrecisionFP32 {
		storage = "bf16"
	}
	lib := t.learner.BLAS()
	return trainer.Info{
		Backend: "cpu",
		Device: fmt.Sprintf("cpu (%d threads, %s/%s), blas %s", runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH,
			lib.Describe()),
		Precision: t.learner.Online().Precision(), StorageDType: storage, ComputeDType: "f32",
		StateDType: trainer.StateDType(t.cfg.Precision, t.cfg.Optim.StochasticRounding),
		Parameters: t.learner.NumParams(), BLAS: lib.Describe(), Threads: lib.Threads(),
	}
}

func (t *Trainer) usable() error {
	if t.closed {
		return fmt.Errorf("cpu trainer: used after Close")
	}
	return nil
}

// Collect runs steps environment steps in every environment with the
// online network's greedy policy and epsilon-greedy exploration
// (rollout.Collector.Collect) and adds the n-step transitions to replay.
func (t *Trainer) Collect(ctx context.Context, steps int) (trainer.CollectStats, error) {
	if err := t.usable(); err != nil {
		return trainer.CollectStats{}, err
	}
	st, err := t.collector.Collect(ctx, steps, t.learner.Greedy, t.buf)
	st.BufferSize = t.buf.Len()
	return st, err
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
	t.learner.ResetStagnation()
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
		st.GradNormMax = max(st.GradNormMax, res.GradNorm)
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
		q, err := t.meanQ()
		if err != nil {
			return st, fmt.Errorf("train: mean Q: %w", err)
		}
		st.MeanQ = &q
		stag, _ := t.learner.Stagnation()
		st.Stagnation = &stag
	}
	return st, nil
}

// gradientStep samples a batch with importance weights (β annealed by the
// global step), rebuilds its observations from the dataset, runs one
// learner step and writes the new priorities back.
func (t *Trainer) gradientStep() (StepResult, error) {
	beta := replay.Beta(t.cfg.Replay.Beta0, int(t.learner.Steps()), t.cfg.BetaAnnealSteps())
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
func (t *Trainer) Backtest(ctx context.Context, ds *market.Dataset, r market.Range) (sim.Report, error) {
	if err := t.usable(); err != nil {
		return sim.Report{}, err
	}
	rep, err := rollout.Backtest(ds, r, t.learner.Greedy)
	if err == nil {
		err = ctx.Err()
	}
	return rep, err
}

// Close releases the trainer; later calls return an error.
func (t *Trainer) Close() error {
	t.closed = true
	t.learner, t.buf, t.collector = nil, nil, nil
	return nil
}
