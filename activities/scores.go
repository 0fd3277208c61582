package activities

import "github.com/dqnflow/dqnflow/trainer/epochloop"

// Scores track a run's validation backtests for best-checkpoint selection
// and early stopping (epochloop.Scores, whose rules RunEpochs' loop
// applies), with this package's checkpoint refs. The workflow keeps them
// in its state and commits them epoch by epoch with the same rules.
type Scores = epochloop.Scores[CheckpointRef]
