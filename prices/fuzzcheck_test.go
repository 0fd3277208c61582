package prices

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// checkParsed fails t unless b and err, what a decoder made of the input
// name, keep the promises every decoder of this package makes. A rejection
// names the input (a *ParseError's File is name, or starts with it when
// prefix is set: an entry inside an archive) and returns no bars. Accepted
// bars are at least one, in columns of one length, in strictly increasing
// time, with finite positive prices, low ≤ open, close ≤ high, a
// non-negative volume and, where there is one, a spread ≥ 0. It reports
// whether the input was accepted.
func checkParsed(t *testing.T, name string, prefix bool, b *Bars, err error) bool {
	t.Helper()
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) && pe.File != name && !(prefix && strings.HasPrefix(pe.File, name)) {
			t.Fatalf("ParseError names file %q, want %q: %v", pe.File, name, err)
		}
		if !strings.Contains(err.Error(), name) {
			t.Fatalf("error does not name the input %q: %v", name, err)
		}
		if b != nil {
			t.Fatalf("bars beside the error %v", err)
		}
		return false
	}
	n := b.Len()
	if n == 0 {
		t.Fatal("accepted a file with no bars")
	}
	for _, col := range [][]float64{b.Open, b.High, b.Low, b.Close, b.Volume} {
		if len(col) != n || len(b.Time) != n {
			t.Fatalf("column lengths differ: %d bars, a column of %d", n, len(col))
		}
	}
	if b.Spread != nil && len(b.Spread) != n {
		t.Fatalf("%d spreads for %d bars", len(b.Spread), n)
	}
	for i := range n {
		o, h, l, c, v := b.Open[i], b.High[i], b.Low[i], b.Close[i], b.Volume[i]
		for _, x := range []float64{o, h, l, c, v} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("bar %d holds a non-finite value: %v %v %v %v %v", i, o, h, l, c, v)
			}
		}
		if l <= 0 || l > o || o > h || l > c || c > h || v < 0 {
			t.Fatalf("bar %d is inconsistent: open %v high %v low %v close %v volume %v", i, o, h, l, c, v)
		}
		if i > 0 && !b.Time[i].After(b.Time[i-1]) {
			t.Fatalf("bar %d at %s is not after bar %d at %s", i, b.Time[i], i-1, b.Time[i-1])
		}
		if b.Spread != nil && !(b.Spread[i] >= 0) {
			t.Fatalf("bar %d: spread %v", i, b.Spread[i])
		}
	}
	return true
}
