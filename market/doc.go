// Package market turns bars into what an agent trains and is judged on.
//
// It owns the instruments and their costs (instruments.go, instrument.go),
// the sizing of the contract (sizing.go), the features and their
// normalisation (features.go, normalize.go), the Dataset of a run with its
// train, validation and test ranges (Prepare, Load), the data.mirror
// training set (mirror.go), panels of several series (PreparePanel,
// JoinPanel, and the record a panel run's checkpoints keep), the action
// space and the observation layout (types.go), and the seeded synthetic
// series (Synthetic).
//
// The bars themselves, and every price file format they are read from,
// are package prices: a Source reads a file into prices.Bars, and Prepare
// builds the Dataset from them. What trades on a Dataset, the
// environment and the backtest, is package market/sim.
package market
