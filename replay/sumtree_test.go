package replay

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactSum is the sum of v in 256-bit floating point, rounded to float64:
// an independent reference for the tree's float64 pairwise sums.
func exactSum(v []float64) float64 {
	s := new(big.Float).SetPrec(256)
	for _, x := range v {
		s.Add(s, new(big.Float).SetPrec(256).SetFloat64(x))
	}
	f, _ := s.Float64()
	return f
}

func leavesOf(t *sumTree) []float64 {
	out := make([]float64, t.leaves)
	for i := range out {
		out[i] = t.get(i)
	}
	return out
}

func TestSumTreeTotalEqualsSumOfLeavesAfterManyUpdates(t *testing.T) {
	const n = 1000 // not a power of two: padded leaves must stay zero
	rng := rand.New(rand.NewPCG(1, 2))
	tree := newSumTree(n)
	for step := range 200_000 {
		// Masses over eight orders of magnitude, as priorities can span.
		tree.set(rng.IntN(n), math.Exp(rng.Float64()*18-9))
		if step%50_000 != 49_999 {
			continue
		}
		want := exactSum(leavesOf(tree))
		if got := tree.total(); math.Abs(got-want) > 1e-9*want {
			t.Fatalf("after %d updates: total %v, exact sum of leaves %v (relative error %.3g > 1e-9)", step+1, got, want, math.Abs(got-want)/want)
		}
	}
	for k := tree.base + n; k < 2*tree.base; k++ {
		if tree.node[k] != 0 {
			t.Fatalf("padding leaf node %d = %v, want 0", k, tree.node[k])
		}
	}
}

func TestSumTreeRebuildIsBitIdenticalToIncrementalUpdates(t *testing.T) {
	for _, n := range []int{1, 2, 3, 17, 1000} {
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		inc := newSumTree(n)
		for range 20 * n {
			inc.set(rng.IntN(n), rng.ExpFloat64())
		}
		re := newSumTree(n)
		copy(re.node[re.base:], inc.node[inc.base:])
		re.rebuild()
		for k := range inc.node {
			if math.Float64bits(inc.node[k]) != math.Float64bits(re.node[k]) {
				t.Fatalf("n=%d: node %d incremental %v, rebuilt %v", n, k, inc.node[k], re.node[k])
			}
		}
	}
}

// TestSumTreeFindMatchesLinearScan checks find against the definition: the
// leaf i with prefix_i ≤ u < prefix_{i+1}, prefixes summed left to right in
// float64; away from ties, rounding in the two summation orders cannot
// change the answer.
func TestSumTreeFindMatchesLinearScan(t *testing.T) {
	const n = 37
	rng := rand.New(rand.NewPCG(3, 4))
	tree := newSumTree(n)
	prefix := make([]float64, n+1)
	for i := range n {
		m := 0.0
		if i%5 != 2 { // some zero leaves inside the range too
			m = 0.1 + rng.Float64()
		}
		tree.set(i, m)
		prefix[i+1] = prefix[i] + m
	}
	for range 10_000 {
		u := rng.Float64() * prefix[n]
		want := -1
		for i := range n {
			if prefix[i] <= u && u < prefix[i+1] {
				want = i
			}
		}
		if d := min(u-prefix[want], prefix[want+1]-u); d < 1e-9 {
			continue // too close to a boundary to judge
		}
		if got := tree.find(u); got != want {
			t.Fatalf("find(%v) = %d, linear scan gives %d", u, got, want)
		}
	}
}

// TestSumTreeFindNeverReturnsZeroLeaf covers the floating-point edges that
// a naive descent mishandles: u at or beyond the total (rounding of
// (k + r)·T/B) and trailing empty slots and padding leaves.
func TestSumTreeFindNeverReturnsZeroLeaf(t *testing.T) {
	tree := newSumTree(13) // 16 leaves, 3 padding
	for i, m := range []float64{0.3, 0, 0.7, 1e-300, 0, 2, 0.1} {
		tree.set(i, m) // leaves 7..12 stay empty
	}
	total := tree.total()
	for _, u := range []float64{0, 0.3, 1.0, total, math.Nextafter(total, math.Inf(1)), total * (1 + 1e-12), 2 * total} {
		i := tree.find(u)
		if i < 0 || i >= 13 || tree.get(i) <= 0 {
			t.Fatalf("find(%v) = %d with mass %v, want a leaf with positive mass", u, i, tree.get(max(0, min(i, 12))))
		}
	}
	if i := tree.find(total); i != 6 {
		t.Fatalf("find(total) = %d, want the last leaf with mass (6)", i)
	}
}
