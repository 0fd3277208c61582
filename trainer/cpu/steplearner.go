package cpu

import (
	"slices"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// StepLearner is a Learner seen through trainertest.StepLearner, the
// single-step interface of the cross-backend harness: the reference that
// another backend is compared with.
type StepLearner struct {
	l *Learner
}

// NewStepLearner builds the learner of NewLearner(m, o, precision, seed)
// for the cross-backend harness.
func NewStepLearner(m config.ModelConfig, o config.OptimConfig, precision string, seed uint64) (*StepLearner, error) {
	l, err := NewLearner(m, o, precision, seed)
	if err != nil {
		return nil, err
	}
	return &StepLearner{l: l}, nil
}

// Learner returns the learner s drives.
func (s *StepLearner) Learner() *Learner { return s.l }

// SetState loads st (Learner.SetState).
func (s *StepLearner) SetState(st *model.State) error { return s.l.SetState(st) }

// State copies the learner state (Learner.State).
func (s *StepLearner) State() (*model.State, error) { return s.l.State(), nil }

// Distributions runs the online network (Net.Distributions).
func (s *StepLearner) Distributions(obs []float32, rows int, dst []float32) error {
	return s.l.online.Distributions(obs, rows, dst)
}

// Logits runs the online network up to the dueling logits (Net.Logits).
func (s *StepLearner) Logits(obs []float32, rows int, dst []float32) error {
	return s.l.online.Logits(obs, rows, dst)
}

// Targets computes the projected C51 targets (Learner.Targets).
func (s *StepLearner) Targets(b *model.Batch, dst []float32) error { return s.l.Targets(b, dst) }

// Gradient computes the gradient without a step (Learner.Gradient).
func (s *StepLearner) Gradient(b *model.Batch, dst []float32) (float64, []float32, error) {
	res, err := s.l.Gradient(b, dst)
	return res.Loss, slices.Clone(res.PerSample), err
}

// Step runs one training step (Learner.Step).
func (s *StepLearner) Step(b *model.Batch) (loss, gradNorm float64, perSample []float32, err error) {
	res, err := s.l.Step(b)
	return res.Loss, res.GradNorm, slices.Clone(res.PerSample), err
}

// SyncTarget applies the EMA target update (Learner.SyncTarget).
func (s *StepLearner) SyncTarget(tau float64) error { return s.l.SyncTarget(tau) }
