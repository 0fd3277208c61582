package sim

// SetParallelRows sets the work at which BacktestBatch splits a round over
// goroutines and returns the old value; for tests.
func SetParallelRows(n int) int {
	old := parallelRows
	parallelRows = n
	return old
}

// ShapedReward is RewardShape.reward, for the tests of its bits.
func ShapedReward(s RewardShape, dE, unit float64, traded, maxContracts int) float64 {
	return s.reward(dE, unit, traded, maxContracts)
}
