package cpu

import (
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// Tensors returns the learner's state as checkpoint tensors: the tensors
// of model.State.Tensors (online.<block>, target.<block>, adam.m, adam.v,
// adam.step, spectral.<layer>.u). The tensors own their data.
func (l *Learner) Tensors() []checkpoint.Tensor {
	return l.State().Tensors(l.online.model)
}

// LoadTensors replaces the learner's state by the tensors of ck that
// Tensors names (model.ReadState); other tensors of ck (replay buffer,
// random states) are ignored. Every tensor must be present once with its
// dtype and shape, hold finite values, and adam.v must not be negative nor
// adam.step negative. On error, which names the tensor, the learner is
// unchanged.
func (l *Learner) LoadTensors(ck *checkpoint.Checkpoint) error {
	s, err := model.ReadState(ck, l.online.model)
	if err != nil {
		return err
	}
	return l.SetState(s)
}
