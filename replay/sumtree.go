package replay

// sumTree is a complete binary tree of float64 sums over n leaves, stored as
// an array of 2L values where L is the smallest power of two ≥ n: node 1 is
// the root, node k has children 2k and 2k+1, and leaf i is node L+i. Nodes
// 0 and L+n..2L−1 are unused and stay zero.
//
// Each internal node holds exactly fl(left + right) of its two children: set
// recomputes the nodes on the leaf's path from their children instead of
// adding a difference, and rebuild recomputes every node bottom-up. Both
// keep that invariant, so the tree is a function of its leaves alone.
// float64 keeps the relative error of the root within about log2(L)·2⁻⁵³
// of the exact sum of the leaves (pairwise summation), far below the float32
// resolution of the losses that set them.
type sumTree struct {
	leaves int       // n
	base   int       // L
	node   []float64 // 2L values
}

// newSumTree returns a tree of n ≥ 1 zero leaves.
func newSumTree(n int) *sumTree {
	base := 1
	for base < n {
		base <<= 1
	}
	return &sumTree{leaves: n, base: base, node: make([]float64, 2*base)}
}

// total is the sum of all leaves, Σ m_i.
func (t *sumTree) total() float64 { return t.node[1] }

// get returns leaf i.
func (t *sumTree) get(i int) float64 { return t.node[t.base+i] }

// set sets leaf i to v and recomputes every ancestor from its children.
func (t *sumTree) set(i int, v float64) {
	k := t.base + i
	t.node[k] = v
	for k >>= 1; k >= 1; k >>= 1 {
		t.node[k] = t.node[2*k] + t.node[2*k+1]
	}
}

// rebuild recomputes every internal node from the leaves, bottom-up. It
// gives the same bits as any sequence of set calls that ends with the same
// leaves.
func (t *sumTree) rebuild() {
	for k := t.base - 1; k >= 1; k-- {
		t.node[k] = t.node[2*k] + t.node[2*k+1]
	}
}

// find returns the leaf whose cumulative range holds u, descending from the
// root: go left when u < left sum, otherwise subtract the left sum and go
// right. Rounding can leave u at or past the end of a node's mass (for
// example u = T after (k + r)·T/B rounds up), which would lead into a zero
// leaf; so the descent goes right only when the right subtree has positive
// mass and left whenever it has none. As the chosen node always has positive
// mass, find returns a leaf with m_i > 0 whenever total() > 0. Leaves that
// hold no transition are zero and are never returned.
func (t *sumTree) find(u float64) int {
	k := 1
	for k < t.base {
		left, right := t.node[2*k], t.node[2*k+1]
		if u < left || right <= 0 {
			k = 2 * k
		} else {
			u -= left
			k = 2*k + 1
		}
	}
	return k - t.base
}
