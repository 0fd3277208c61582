package replay

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkSampleUpdate is one training step's replay work at the default
// sizes: sample 256 of 100000 transitions, then set their priorities.
func BenchmarkSampleUpdate(b *testing.B) {
	const capacity, batch = 100_000, 256
	buf := mustNew(b, testConfig(capacity, 0.6, 1e-6))
	for k := range capacity {
		if err := buf.Add(transition(k % 1000)); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	losses := make([]float32, 1<<16)
	for i := range losses {
		losses[i] = float32(rng.ExpFloat64())
	}
	idx := make([]int, batch)
	w := make([]float32, batch)
	off := 0
	b.ReportAllocs()
	for b.Loop() {
		if err := buf.Sample(rng, batch, 0.5, idx, w); err != nil {
			b.Fatal(err)
		}
		if err := buf.UpdatePriorities(idx, losses[off:off+batch]); err != nil {
			b.Fatal(err)
		}
		off = (off + batch) % (len(losses) - batch)
	}
}
