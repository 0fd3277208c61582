// Package market turns bars into what an agent trains and is judged on.
//
// It owns the instruments and their costs (instruments.go, instrument.go),
// the features and their normalisation (features.go, normalize.go), the
// Dataset of a run with its train, validation and test ranges (Prepare,
// Load), panels of several series (PreparePanel, JoinPanel), the
// futures-style environment and its reward (env.go), the backtest and
// its metrics, the rule baselines, and the seeded synthetic series
// (Synthetic).
//
// The bars themselves, and every price file format they are read from,
// are package prices: a Source reads a file into prices.Bars, and Prepare
// builds the Dataset from them.
package market
