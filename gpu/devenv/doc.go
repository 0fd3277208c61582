// Package devenv owns the device environment: a dataset's bars on the
// device (the market), the vectorised environments and their checkpoint
// state, the Collector that steps them with the step's network and writes
// n-step transitions into the device replay buffer, and the greedy
// Backtest (batched through the inference GEMMs, or one kernel walking
// the range). Its results match package market's host environment by
// construction (the equivalence tests in package gpu).
package devenv
