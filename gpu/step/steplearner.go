package step

import (
	"errors"
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// StepLearner is the single-step view of the CUDA learner that the
// cross-backend harness (trainertest.CrossCheck) drives: the same kernels
// as a training step, on a batch given by the caller instead of sampled.
type StepLearner struct {
	d *device.Device
	l *Learner
}

// NewStepLearner is Backend.NewStepLearner on device d with the tuning su.
func NewStepLearner(d *device.Device, su device.Setup, m config.ModelConfig, o config.OptimConfig, precision string, seed uint64) (*StepLearner, error) {
	switch precision {
	case config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16:
	default:
		return nil, fmt.Errorf("precision %q: the cuda backend runs %s, %s and %s: %w", precision,
			config.PrecisionFP32, config.PrecisionBF16Mixed, config.PrecisionBF16, trainer.ErrUnsupported)
	}
	s := &StepLearner{d: d}
	err := d.Dev.Do(func(c *cuda.Ctx) error {
		var err error
		s.l, err = NewLearner(c, d, su, m, o, precision, seed, model.NewState(m, seed))
		return err
	})
	return s, err
}

// Close frees the learner's device memory.
func (s *StepLearner) Close() error {
	return s.d.Dev.Do(func(c *cuda.Ctx) error { return s.l.Free(c) })
}

func (s *StepLearner) do(f func(c *cuda.Ctx) error) error { return s.d.Dev.Do(f) }

// SetState loads s into both networks, the moments, step and spectral vectors.
func (s *StepLearner) SetState(st *model.State) error {
	return s.do(func(c *cuda.Ctx) error { return s.l.setState(c, st) })
}

// State copies the learner state back.
func (s *StepLearner) State() (st *model.State, err error) {
	err = s.do(func(c *cuda.Ctx) error { st, err = s.l.State(c); return err })
	return st, err
}

func (s *StepLearner) head(obs []float32, rows int, dst []float32, logits bool) error {
	return s.do(func(c *cuda.Ctx) error {
		want := rows * model.NumActions * s.l.M.Atoms
		if len(dst) != want {
			return fmt.Errorf("dst has %d values, want %d", len(dst), want)
		}
		p, err := s.l.Infer(c, obs, rows, true)
		if err != nil {
			return err
		}
		src := p.probs
		if logits {
			src = p.logits
		}
		return cuda.Download(c, dst, src)
	})
}

// Distributions writes the online network's probabilities.
func (s *StepLearner) Distributions(obs []float32, rows int, dst []float32) error {
	return s.head(obs, rows, dst, false)
}

// Logits writes the online network's dueling logits.
func (s *StepLearner) Logits(obs []float32, rows int, dst []float32) error {
	return s.head(obs, rows, dst, true)
}

// load checks b and puts it into the plan's buffers: observations cast to
// the storage type, actions, returns, discounts and the given weights.
func (s *StepLearner) load(c *cuda.Ctx, b *model.Batch) (*stepPlan, error) {
	n, err := b.Check()
	if err != nil {
		return nil, err
	}
	p, err := s.l.Plan(c, n)
	if err != nil {
		return nil, err
	}
	obs := append(append(make([]float32, 0, 2*n*ObsWidth), b.Obs...), b.NextObs...)
	tmp, err := c.Alloc(4 * len(obs))
	if err != nil {
		return nil, err
	}
	defer c.Free(tmp)
	if err := cuda.Upload(c, tmp, obs); err != nil {
		return nil, err
	}
	if err := c.Launch(s.l.K.Fn["cast_rows"], device.Dim(device.CeilDiv(len(obs), 256)), device.Dim(256), 0, s.l.Stream, tmp, p.X, int64(len(obs))); err != nil {
		return nil, err
	}
	for _, e := range []error{
		cuda.Upload(c, p.Act, b.Actions), cuda.Upload(c, p.ret, b.Return),
		cuda.Upload(c, p.disc, b.Discount), cuda.Upload(c, p.w, b.Weight),
	} {
		if e != nil {
			return nil, e
		}
	}
	return p, c.Sync(s.l.Stream)
}

// Targets writes the projected double-DQN C51 targets of b.
func (s *StepLearner) Targets(b *model.Batch, dst []float32) error {
	return s.do(func(c *cuda.Ctx) error {
		p, err := s.load(c, b)
		if err != nil {
			return err
		}
		if len(dst) != p.N*model.NumBranches*s.l.M.Atoms {
			return fmt.Errorf("targets: dst has %d values, want %d", len(dst), p.N*model.NumBranches*s.l.M.Atoms)
		}
		if err := s.l.runAll(c, append(append([]device.Launch{}, p.Fwd...), p.lossGiven)); err != nil {
			return err
		}
		if err := c.Sync(s.l.Stream); err != nil {
			return err
		}
		return cuda.Download(c, dst, p.tgts)
	})
}

// gradient runs forward, loss and backward and returns the loss and the
// per-sample losses.
func (s *StepLearner) gradient(c *cuda.Ctx, b *model.Batch, update bool) (*stepPlan, float64, []float32, error) {
	p, err := s.load(c, b)
	if err != nil {
		return nil, 0, nil, err
	}
	ls := s.l.gradientLaunches(p, p.lossGiven)
	if update {
		ls = append(append(ls, p.specL), s.l.updateLaunches(p)...)
	}
	if err := s.l.runAll(c, ls); err != nil {
		return nil, 0, nil, err
	}
	st, err := s.l.ReadState(c)
	if err != nil {
		return nil, 0, nil, err
	}
	per := make([]float32, p.N)
	if err := cuda.Download(c, per, p.sample); err != nil {
		return nil, 0, nil, err
	}
	if st.Abort != 0 {
		what := "gradient norm"
		if st.Abort == 2 {
			what = "loss"
		}
		// Clear the flag: the state is unchanged, as after the reference's error.
		if err := cuda.Upload(c, s.l.St+StAbort, []int32{0}); err != nil {
			return nil, 0, nil, err
		}
		return p, float64(st.loss), per, fmt.Errorf("step %d: %s is not finite: %w", st.T+1, what, trainer.ErrNonFinite)
	}
	return p, float64(st.loss), per, nil
}

// Gradient writes ∂loss/∂θ of b, changing no state.
func (s *StepLearner) Gradient(b *model.Batch, dst []float32) (loss float64, perSample []float32, err error) {
	if len(dst) != s.l.np {
		return 0, nil, fmt.Errorf("gradient: dst has %d values, want NumParams = %d", len(dst), s.l.np)
	}
	err = s.do(func(c *cuda.Ctx) error {
		_, loss, perSample, err = s.gradient(c, b, false)
		if err != nil && !errors.Is(err, trainer.ErrNonFinite) {
			return err
		}
		return cuda.Download(c, dst, s.l.grad)
	})
	return loss, perSample, err
}

// Step runs one training step on b: gradient, clipping, AdamW, the spectral
// step and the refresh of the bf16 copies.
func (s *StepLearner) Step(b *model.Batch) (loss, gradNorm float64, perSample []float32, err error) {
	err = s.do(func(c *cuda.Ctx) error {
		_, loss, perSample, err = s.gradient(c, b, true)
		if err != nil {
			return err
		}
		gradNorm, err = s.l.gradNorm(c)
		return err
	})
	return loss, gradNorm, perSample, err
}

// SyncTarget applies target ← τ·online + (1−τ)·target.
func (s *StepLearner) SyncTarget(tau float64) error {
	return s.do(func(c *cuda.Ctx) error { return s.l.SyncTarget(c, tau) })
}
