package cpu

import (
	"github.com/dqnflow/dqnflow/trainer/model"
)

// meanQ is trainer.TrainStats.MeanQ: the online network's expected Q,
// Q(s, a) = Σ_j z_j p_j(s, a), of the action taken in each sample of the
// last batch, averaged over the three branches and the batch:
//
//	(1/n) Σ_i (1/3) Σ_d Q_d(s_i, a_id)
//
// in float64. It reads the batch Train left in t.batch and runs one
// forward pass; it changes no state that training or a snapshot sees.
func (t *Trainer) meanQ() (float64, error) {
	n := len(t.batch.Return)
	q := make([]float32, n*model.NumActions)
	if err := t.learner.QValues(t.batch.Obs, n, q); err != nil {
		return 0, err
	}
	var sum float64
	for i := range n {
		row := q[i*model.NumActions : (i+1)*model.NumActions]
		for d := range model.NumBranches {
			sum += float64(row[model.BranchOffset[d]+int(t.batch.Actions[i*model.NumBranches+d])])
		}
	}
	return sum / float64(n*model.NumBranches), nil
}
