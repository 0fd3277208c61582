package market

// SetParallelRows sets the work at which BacktestBatch splits a round over
// goroutines and returns the old value; for tests.
func SetParallelRows(n int) int {
	old := parallelRows
	parallelRows = n
	return old
}
