package prices

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// FuzzFormatDecodeAcceptsOnlyValidBars feeds arbitrary bytes to the
// format dispatch of Source.Bars (text with and without a header, LEAN
// zips, Parquet). It must never panic; a rejection names the input and
// returns no bars; an accepted file holds at least one bar, in strictly
// increasing time, with finite positive prices inside [low, high], a
// non-negative volume and, where there is one, a spread ≥ 0 for every
// bar. Seeds: every format fixture, and a few short cases.
func FuzzFormatDecodeAcceptsOnlyValidBars(f *testing.F) {
	for _, p := range []string{fixTab, fixHeaderless, fixParquet, fixAAPL, fixVXX, fixEURUSD} {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, s := range []string{
		"2024-01-02 10:00,1,2,1,1.5,0\n2024-01-02 11:00,1,2,1,1.5,0\n",
		"2024-01-02 10:00\t1\t2\t1\t1.5\n",
		"PK\x03\x04", "PAR1", "PAR1\x00\x00\x00\x00PAR1", "\x1f\x8b", "",
	} {
		f.Add([]byte(s))
	}
	src := Source{Limits: Limits{MaxBytes: 1 << 20, MaxBars: 100_000}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		const name = "fuzz.bin"
		b, err := src.decode(context.Background(), name, bytes.NewReader(raw))
		if err != nil {
			var pe *ParseError
			if errors.As(err, &pe) && !strings.HasPrefix(pe.File, name) {
				t.Fatalf("ParseError names file %q, want %q: %v", pe.File, name, err)
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error does not name the input %q: %v", name, err)
			}
			if b != nil {
				t.Fatalf("bars beside the error %v", err)
			}
			return
		}
		n := b.Len()
		if n == 0 || b.Origin.Format == "" {
			t.Fatalf("%d bars, format %q", n, b.Origin.Format)
		}
		for _, col := range [][]float64{b.Open, b.High, b.Low, b.Volume} {
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
	})
}
