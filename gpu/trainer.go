package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/devenv"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/step"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"

	"github.com/dqnflow/dqnflow/bf16"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/replay"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// Backend is the CUDA backend of trainer.Backend on one device, with the
// tuning every trainer it builds runs.
type Backend struct {
	d       *device.Device
	s       device.Setup
	ordinal int
}

// NewBackend opens CUDA device ordinal (once per process) and its kernel
// compiler, and resolves tu on it (an invalid tuning, or one asking for
// what the device cannot run, is an error naming the field). It fails
// within seconds, naming what is missing, on a machine without a driver,
// a device or NVRTC.
func NewBackend(ordinal int, tu device.Tuning) (*Backend, error) {
	d, err := device.Open(ordinal)
	if err != nil {
		return nil, err
	}
	s, err := d.Resolve(tu)
	if err != nil {
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	return &Backend{d: d, s: s, ordinal: ordinal}, nil
}

// Tuning is the tuning the backend's trainers run.
func (b *Backend) Tuning() device.Tuning { return b.s.Tuning }

// Describe is a one-line description of the device.
func (b *Backend) Describe() string {
	i := b.d.Info
	return fmt.Sprintf("%s (cuda:%d, sm_%d%d, %d SMs, %.0f GiB)", i.Name, b.ordinal, i.Major, i.Minor, i.SMs, float64(i.TotalMem)/(1<<30))
}

// Trainer is the CUDA trainer: the learner, the replay buffer, the
// environments and the collector in device memory, the training step and
// the collector step as CUDA graphs, and the greedy backtest as one kernel
// (gpu/devenv).
type Trainer struct {
	b         *Backend
	cfg       config.RunConfig
	ds        *market.Dataset
	l         *step.Learner
	col       *devenv.Collector
	bt        devenv.Backtest
	samplePCG *rand.PCG
	info      trainer.Info
	events    [2]cuda.Event
	hostLoss  []float32
	hostNorm  []float32
	closed    bool
}

func checkDevice(cfg config.RunConfig, ordinal int) error {
	switch cfg.Device {
	case "cuda", "auto", fmt.Sprintf("cuda:%d", ordinal):
	default:
		return fmt.Errorf("cuda trainer: config device %q: this worker runs cuda:%d: %w", cfg.Device, ordinal, trainer.ErrUnsupported)
	}
	switch cfg.Precision {
	case config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16:
		return nil
	}
	return fmt.Errorf("precision %q: %w", cfg.Precision, config.ErrInvalid)
}

// New builds a trainer for cfg on ds; see trainer.Backend.
func (b *Backend) New(_ context.Context, cfg config.RunConfig, ds *market.Dataset, warm *checkpoint.Checkpoint) (trainer.Trainer, error) {
	s := model.NewState(cfg.Model, cfg.Seed)
	if warm != nil {
		for _, x := range []struct {
			prefix string
			dst    *[]float32
		}{{"online.", &s.Online}, {"target.", &s.Target}} {
			p, err := model.ReadParams(warm, x.prefix, cfg.Model)
			if errors.Is(err, model.ErrNotFinite) {
				return nil, fmt.Errorf("warm start: %w: %w", trainer.ErrNonFinite, err)
			}
			if err != nil {
				return nil, fmt.Errorf("warm start: %w", err)
			}
			*x.dst = p
		}
	}
	return b.build(cfg, ds, s)
}

func (b *Backend) build(cfg config.RunConfig, ds *market.Dataset, s *model.State) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ds == nil {
		return nil, fmt.Errorf("cuda trainer: nil dataset")
	}
	if ds.Mirrored() {
		return nil, fmt.Errorf("cuda trainer: config data.mirror: the device collector does not play a mirrored training range yet (%w); run it with device \"cpu\"", trainer.ErrUnsupported)
	}
	if err := checkDevice(cfg, b.ordinal); err != nil {
		return nil, err
	}
	t := &Trainer{b: b, cfg: cfg, ds: ds, samplePCG: rand.NewPCG(cfg.Seed, model.StreamSample)}
	t.bt.Kernel = b.s.Backtest == "kernel"
	bf := cfg.Precision != config.PrecisionFP32
	check, err := step.SelfCheck(b.d, b.s, b.Describe(), cfg.Model, bf)
	if err != nil {
		return nil, err
	}
	if cfg.Precision == config.PrecisionBF16 {
		sc, err := step.StateCheck(b.d, b.s, b.Describe(), cfg.Model, cfg.Seed)
		if err != nil {
			return nil, err
		}
		check += "; " + sc
	}
	err = b.d.Dev.Do(func(c *cuda.Ctx) error {
		l, err := step.NewLearner(c, b.d, b.s, cfg.Model, cfg.Optim, cfg.Precision, cfg.Seed, s)
		if err != nil {
			return err
		}
		t.l = l
		l.Margin = cfg.GreedyMargin()
		if l.Replay, err = step.NewReplay(c, l, annealed(cfg), ds); err != nil {
			return err
		}
		if t.col, err = devenv.NewCollector(c, l, cfg, ds); err != nil {
			return err
		}
		for i := range t.events {
			if t.events[i], err = c.NewEvent(); err != nil {
				return err
			}
		}
		p, err := l.Plan(c, cfg.BatchSize)
		if err != nil {
			return err
		}
		_, err = l.CaptureStep(c, p)
		return err
	})
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("cuda trainer on %s: %w", b.Describe(), err)
	}
	storage := "f32"
	if bf {
		storage = "bf16"
	}
	compute := "f32"
	if k := b.s.GradKChunk; k > 0 {
		// The precision study's control (ADR 0017) says what it changed.
		compute = fmt.Sprintf("f32 (weight gradients summed in k chunks of %d rows, DQNFLOW_GRAD_KCHUNK)", k)
	}
	t.info = trainer.Info{Backend: "cuda", Device: b.Describe(), Precision: cfg.Precision,
		StorageDType: storage, ComputeDType: compute, StateDType: trainer.StateDType(cfg.Precision, cfg.Optim.StochasticRounding),
		Parameters: model.NumParams(cfg.Model), SelfCheck: check, Tuning: b.s.Tuning.Record()}
	return t, nil
}

// NewStepLearner builds a learner for model m and optimiser o on the
// backend's device in precision fp32, bf16-mixed or bf16, initialised from
// seed as every backend does (model.NewState); seed also keys the
// stochastic rounding of precision bf16 (optim.stochastic_rounding).
func (b *Backend) NewStepLearner(m config.ModelConfig, o config.OptimConfig, precision string, seed uint64) (*step.StepLearner, error) {
	return step.NewStepLearner(b.d, b.s, m, o, precision, seed)
}

// Info reports the device and the precision measured by the self-check.
func (t *Trainer) Info() trainer.Info { return t.info }

func (t *Trainer) usable() error {
	if t.closed {
		return fmt.Errorf("cuda trainer: used after Close")
	}
	return nil
}

// Collect steps the environments on the device with the ε-greedy policy
// of the online network and writes the n-step transitions into the device
// replay buffer (Collector).
func (t *Trainer) Collect(ctx context.Context, steps int) (trainer.CollectStats, error) {
	if err := t.usable(); err != nil {
		return trainer.CollectStats{}, err
	}
	var st trainer.CollectStats
	err := t.do(func(c *cuda.Ctx) error {
		var err error
		st, err = t.col.Collect(ctx, c, t.l, steps)
		return err
	})
	return st, err
}

// readbackInterval is the number of steps between reads of the loss and
// gradient-norm histories (and the abort flag) during Train.
func (t *Trainer) readbackInterval(steps int) int {
	if v := t.cfg.ReadbackInterval; v > 0 {
		return v
	}
	return max(1, steps)
}

// launchSteps queues n training steps on s: graphs of k steps (gk, when a
// graph holds more than one: Tuning.StepsPerGraph), then single steps (g).
func launchSteps(c *cuda.Ctx, s cuda.Stream, g, gk cuda.GraphExec, k, n int) error {
	if gk != 0 {
		for ; n >= k; n -= k {
			if err := c.GraphLaunch(gk, s); err != nil {
				return err
			}
		}
	}
	for range n {
		if err := c.GraphLaunch(g, s); err != nil {
			return err
		}
	}
	return nil
}

// Train replays the captured step steps times. The host does not wait for
// the device inside a chunk of readback_interval steps; it reads the loss
// and gradient-norm histories of a chunk while the next one runs, and stops
// at the first non-finite value with trainer.ErrNonFinite (the weights are
// those before the failing step).
func (t *Trainer) Train(ctx context.Context, steps int, progress func(trainer.Progress)) (trainer.TrainStats, error) {
	var st trainer.TrainStats
	if err := t.usable(); err != nil {
		return st, err
	}
	if steps < 0 {
		return st, fmt.Errorf("train: %d steps: must not be negative", steps)
	}
	for t.l.Replay.Size < t.cfg.Replay.Warmup {
		if _, err := t.Collect(ctx, 1); err != nil {
			return st, fmt.Errorf("train: warm-up collection: %w", err)
		}
	}
	l := t.l
	var lossSum, normSum float64
	done := 0
	err := t.do(func(c *cuda.Ctx) error {
		p, err := l.Plan(c, t.cfg.BatchSize)
		if err != nil {
			return err
		}
		if err := l.ResetStagnation(c); err != nil {
			return err
		}
		g, err := l.CaptureStep(c, p)
		if err != nil {
			return err
		}
		gk, err := l.CaptureStepsPerGraph(c, p)
		if err != nil {
			return err
		}
		// This call's sampling key, from the run's checkpointed sample stream.
		if err := cuda.Upload(c, p.SampleArgs+8*step.SampleKeyWord, []uint64{t.samplePCG.Uint64()}); err != nil {
			return err
		}
		chunk := min(t.readbackInterval(steps), step.HistCap)
		for done < steps {
			seg := min(steps-done, step.HistCap)
			if err := cuda.Upload(c, l.St+step.StLocal, []int64{0}); err != nil {
				return err
			}
			// Chunks [from, to) of this segment; chunk k records events[k%2],
			// and at most two are in flight, so the oldest is always read
			// before its event is recorded again.
			type span struct {
				from, to int
				ev       cuda.Event
			}
			var pending []span
			launched, k := 0, 0
			for launched < seg || len(pending) > 0 {
				for launched < seg && len(pending) < 2 && ctx.Err() == nil {
					to := min(seg, launched+chunk)
					if err := launchSteps(c, l.Stream, g, gk, l.S.StepsPerGraph, to-launched); err != nil {
						return err
					}
					ev := t.events[k%2]
					if err := c.Record(ev, l.Stream); err != nil {
						return err
					}
					pending = append(pending, span{launched, to, ev})
					launched, k = to, k+1
				}
				if len(pending) == 0 {
					break // cancelled with nothing in flight
				}
				sp := pending[0]
				pending = pending[1:]
				if err := c.EventSync(sp.ev); err != nil {
					return err
				}
				ls, ns, ok, err := t.readHistory(c, sp.from, sp.to)
				if err != nil {
					return err
				}
				var cl, cn float64
				for i := range ls {
					cl += float64(ls[i])
					cn += float64(ns[i])
					st.GradNormMax = max(st.GradNormMax, float64(ns[i]))
				}
				if !ok {
					if err := c.Sync(l.Stream); err != nil {
						return err
					}
					return t.nonFinite(c)
				}
				lossSum += cl
				normSum += cn
				done += sp.to - sp.from
				if progress != nil {
					n := float64(sp.to - sp.from)
					progress(trainer.Progress{Step: done, Steps: steps, GlobalStep: t.globalStep(c), Loss: cl / n, GradNorm: cn / n})
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	st.Steps = done
	if done > 0 {
		st.Loss, st.GradNorm = lossSum/float64(done), normSum/float64(done)
	}
	_ = t.do(func(c *cuda.Ctx) error { st.GlobalStep = t.globalStep(c); return nil })
	if err == nil && done > 0 {
		err = t.do(func(c *cuda.Ctx) error {
			stag, _, err := l.Stagnation(c)
			if err != nil {
				return err
			}
			st.Stagnation = &stag
			q, err := t.meanQ(c)
			if err != nil {
				return fmt.Errorf("train: mean Q: %w", err)
			}
			st.MeanQ = &q
			return nil
		})
	}
	return st, err
}

// meanQ is trainer.TrainStats.MeanQ, as the CPU backend computes it: the
// online network's expected Q of the action taken in each sample of the
// last batch the step sampled (the observations s in the plan's operand
// buffer, already in the storage type, and the actions), averaged over the
// three branches and the batch in float64. It changes no training state.
func (t *Trainer) meanQ(c *cuda.Ctx) (float64, error) {
	l := t.l
	p, err := l.Plan(c, t.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	n := p.N
	obs := make([]float32, n*step.ObsWidth)
	if l.BF16 {
		h := make([]uint16, n*step.ObsWidth)
		if err := cuda.Download(c, h, p.X); err != nil {
			return 0, err
		}
		for i, b := range h {
			obs[i] = bf16.BF16(b).Float32()
		}
	} else if err := cuda.Download(c, obs, p.X); err != nil {
		return 0, err
	}
	act := make([]int32, n*model.NumBranches)
	if err := cuda.Download(c, act, p.Act); err != nil {
		return 0, err
	}
	ip, err := l.Infer(c, obs, n, false)
	if err != nil {
		return 0, err
	}
	q := make([]float32, n*model.NumActions)
	if err := cuda.Download(c, q, ip.Q); err != nil {
		return 0, err
	}
	var sum float64
	for i := range n {
		for d := range model.NumBranches {
			a := int(act[i*model.NumBranches+d])
			if a < 0 || a >= market.BranchSizes[d] {
				return 0, fmt.Errorf("sample %d branch %d: action %d on the device", i, d, a)
			}
			sum += float64(q[i*model.NumActions+model.BranchOffset[d]+a])
		}
	}
	return sum / float64(n*model.NumBranches), nil
}

// readHistory reads the loss and norm of local steps [from, to) and reports
// whether all are finite and the abort flag is clear.
func (t *Trainer) readHistory(c *cuda.Ctx, from, to int) (loss, norm []float32, ok bool, err error) {
	n := to - from
	if cap(t.hostLoss) < n {
		t.hostLoss, t.hostNorm = make([]float32, n), make([]float32, n)
	}
	loss, norm = t.hostLoss[:n], t.hostNorm[:n]
	if err = cuda.Download(c, loss, t.l.LossHist+cuda.DevPtr(4*from)); err != nil {
		return
	}
	if err = cuda.Download(c, norm, t.l.NormHist+cuda.DevPtr(4*from)); err != nil {
		return
	}
	ab := make([]int32, 1)
	if err = cuda.Download(c, ab, t.l.St+step.StAbort); err != nil {
		return
	}
	ok = ab[0] == 0
	for i := range loss {
		if !finite(loss[i]) || !finite(norm[i]) {
			ok = false
		}
	}
	return
}

func finite(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }

func (t *Trainer) globalStep(c *cuda.Ctx) int64 {
	v := make([]int64, 1)
	if err := cuda.Download(c, v, t.l.St+step.StT); err != nil {
		return -1
	}
	return v[0]
}

// nonFinite builds the error of an aborted step.
func (t *Trainer) nonFinite(c *cuda.Ctx) error {
	s, err := t.l.ReadState(c)
	if err != nil {
		return err
	}
	what := "gradient norm"
	if s.Abort == 2 {
		what = "loss"
	}
	lv := make([]float32, 1)
	nv := make([]float32, 1)
	_ = cuda.Download(c, lv, t.l.LossHist+cuda.DevPtr(4*s.Local))
	_ = cuda.Download(c, nv, t.l.NormHist+cuda.DevPtr(4*s.Local))
	v := nv[0]
	if s.Abort == 2 {
		v = lv[0]
	}
	return fmt.Errorf("train: global step %d: %s is %g: %w", s.T+1, what, v, trainer.ErrNonFinite)
}

// SyncTarget applies target ← τ·online + (1−τ)·target, τ = optim.target_tau.
func (t *Trainer) SyncTarget() error {
	if err := t.usable(); err != nil {
		return err
	}
	return t.do(func(c *cuda.Ctx) error { return t.l.SyncTarget(c, t.cfg.Optim.TargetTau) })
}

// Backtest runs the online network's greedy policy over bars r of ds:
// the host's accounting asks the device network for many actions per call
// (sim.BacktestBatch), or with DQNFLOW_BACKTEST=kernel one kernel walks
// the range (Backtest).
func (t *Trainer) Backtest(ctx context.Context, ds *market.Dataset, r market.Range) (sim.Report, error) {
	if err := t.usable(); err != nil {
		return sim.Report{}, err
	}
	var rep sim.Report
	err := t.do(func(c *cuda.Ctx) error {
		var err error
		rep, err = t.bt.Run(c, t.l, t.col.Mk, ds, r)
		return err
	})
	if err == nil {
		err = ctx.Err()
	}
	return rep, err
}

// Snapshot copies the whole trainer state to the host in the checkpoint
// format every backend shares.
func (t *Trainer) Snapshot() (*checkpoint.Checkpoint, error) {
	encode, err := t.Capture()
	if err != nil {
		return nil, err
	}
	return encode()
}

// Capture downloads the whole trainer state (weights, optimiser, spectral
// vectors, the replay buffer, the environments) and copies the sampling
// stream; the returned function checks the replay buffer and encodes the
// checkpoint from those copies, on any goroutine (trainer.Capturer).
func (t *Trainer) Capture() (func() (*checkpoint.Checkpoint, error), error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	var s *model.State
	var rs replay.Storage
	var cts []checkpoint.Tensor
	err := t.do(func(c *cuda.Ctx) error {
		var err error
		if s, err = t.l.State(c); err != nil {
			return err
		}
		if rs, err = t.l.Replay.Storage(c, t.l); err != nil {
			return err
		}
		cts, err = t.col.Tensors(c, t.l)
		return err
	})
	if err != nil {
		return nil, err
	}
	rb, err := t.samplePCG.MarshalBinary()
	if err != nil {
		return nil, err
	}
	meta := map[string]string{
		checkpoint.MetaFormat:     checkpoint.FormatVersion,
		checkpoint.MetaBackend:    "cuda",
		checkpoint.MetaPrecision:  t.cfg.Precision,
		checkpoint.MetaGlobalStep: strconv.FormatInt(s.Step, 10),
		checkpoint.MetaConfig:     string(mustJSON(t.cfg)),
		checkpoint.MetaInstrument: string(mustJSON(t.ds.Instrument)),
		checkpoint.MetaNormalizer: string(mustJSON(t.ds.Norm)),
		checkpoint.MetaDevice:     t.info.Device,
		checkpoint.MetaSelfCheck:  t.info.SelfCheck,
		checkpoint.MetaTuning:     t.info.Tuning,
	}
	cfg := t.cfg
	return func() (*checkpoint.Checkpoint, error) {
		buf, err := replay.FromStorage(cfg.Replay, rs)
		if err != nil {
			return nil, fmt.Errorf("snapshot replay: %w", err)
		}
		ts := s.Tensors(cfg.Model)
		ts = append(ts, buf.Tensors(model.ReplayPrefix)...)
		ts = append(ts, cts...)
		ts = append(ts, checkpoint.U8Tensor(model.TensorRNGSample, []int{len(rb)}, rb))
		return &checkpoint.Checkpoint{Meta: meta, Tensors: ts}, nil
	}, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // plain structs of numbers and strings
	}
	return b
}

// Restore rebuilds the trainer saved in ck (by any backend) on ds.
func (b *Backend) Restore(_ context.Context, ck *checkpoint.Checkpoint, ds *market.Dataset) (trainer.Trainer, error) {
	cfg, err := trainer.CheckpointConfig(ck)
	if err != nil {
		return nil, err
	}
	inst, norm, err := trainer.CheckpointMarket(ck)
	if err != nil {
		return nil, err
	}
	if ds == nil || !market.SameContract(inst, ds.Instrument) || !reflect.DeepEqual(norm, ds.Norm) {
		return nil, fmt.Errorf("restore: the dataset's instrument or feature normalisation differs from the checkpoint's: prepare the data with the checkpoint's config (same file and ranges)")
	}
	// A checkpoint written by a CPU worker says device "cpu"; restored here it runs on this device.
	cfg.Device = "cuda"
	s, err := model.ReadState(ck, cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	buf, err := replay.New(cfg.Replay)
	if err != nil {
		return nil, err
	}
	if err := buf.Load(ck, model.ReplayPrefix); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	t, err := b.build(cfg, ds, s)
	if err != nil {
		return nil, err
	}
	if err := b.d.Dev.Do(func(c *cuda.Ctx) error { return t.col.Load(c, t.l, ck) }); err != nil {
		t.Close()
		return nil, fmt.Errorf("restore: %w", err)
	}
	tn, ok := ck.Find(model.TensorRNGSample)
	if !ok || tn.DType != checkpoint.U8 {
		t.Close()
		return nil, fmt.Errorf("restore: tensor %s: missing or not U8", model.TensorRNGSample)
	}
	if err := t.samplePCG.UnmarshalBinary(tn.Data); err != nil {
		t.Close()
		return nil, fmt.Errorf("restore: tensor %s: %w", model.TensorRNGSample, err)
	}
	if err := b.d.Dev.Do(func(c *cuda.Ctx) error { return t.l.Replay.Load(c, t.l, buf.Storage()) }); err != nil {
		t.Close()
		return nil, fmt.Errorf("restore: %w", err)
	}
	return t, nil
}

// Close frees the trainer's device memory; later calls return an error.
func (t *Trainer) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	return t.do(func(c *cuda.Ctx) error {
		for _, e := range t.events {
			if e != 0 {
				_ = c.DestroyEvent(e)
			}
		}
		if t.l == nil {
			return nil
		}
		if t.col != nil {
			_ = t.col.Free(c)
		}
		_ = t.bt.Free(c)
		return t.l.Free(c)
	})
}

// do runs f on the device's thread. A CUDA error there, other than running
// out of memory, means the device or its context failed: the trainer's
// state on it is gone, so the error wraps trainer.ErrDevice and the worker
// stops taking runs (ADR 0001).
func (t *Trainer) do(f func(c *cuda.Ctx) error) error { return deviceErr(t.b.d.Dev.Do(f)) }

func deviceErr(err error) error {
	var ce *cuda.Error
	if err == nil || !errors.As(err, &ce) || ce.Name == "CUDA_ERROR_OUT_OF_MEMORY" || errors.Is(err, trainer.ErrDevice) {
		return err
	}
	return fmt.Errorf("%w: %w", trainer.ErrDevice, err)
}

// annealed is cfg's replay section with beta_steps resolved to the β
// schedule's length in gradient steps (config.RunConfig.BetaAnnealSteps),
// which the loss kernel takes as a number.
func annealed(cfg config.RunConfig) config.ReplayConfig {
	r := cfg.Replay
	r.BetaSteps = cfg.BetaAnnealSteps()
	return r
}
