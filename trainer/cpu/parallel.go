package cpu

import "sync"

// parallel runs fn(lo, hi, w) on the contiguous chunks w = 0, …, k−1 of
// [0, n) (k = min(workers, n), chunk w is [w·n/k, (w+1)·n/k)), chunk 0 on
// the calling goroutine, and returns when all are done. The work of one
// index must not depend on the others' (each writes its own outputs), so
// that the result does not depend on workers. With one worker it is a plain
// call and allocates nothing; with more, the goroutines are a few small
// allocations, as blas.Gonum's tiles are.
func parallel(workers, n int, fn func(lo, hi, w int)) {
	k := min(workers, n)
	if k <= 1 {
		fn(0, n, 0)
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < k; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w*n/k, (w+1)*n/k, w)
		}()
	}
	fn(0, n/k, 0)
	wg.Wait()
}

// scratch is one worker's memory for the per-sample work of a step.
type scratch struct {
	mean   []float32 // Atoms: dueling mean of one branch
	l, p   []float32 // largest branch×Atoms: logits and probabilities of one branch
	logp   []float32 // Atoms: log-softmax of one action
	prob   []float32 // Atoms: softmax of one action
	glogit []float32 // Atoms: ∂loss/∂logits of one taken action
	nextQ  []float32 // model.NumActions: online Q(s′, ·) of one sample
}

func newScratch(atoms, actions int) scratch {
	return scratch{
		mean: make([]float32, atoms), l: make([]float32, maxBranch()*atoms), p: make([]float32, maxBranch()*atoms),
		logp: make([]float32, atoms), prob: make([]float32, atoms), glogit: make([]float32, atoms),
		nextQ: make([]float32, actions),
	}
}
