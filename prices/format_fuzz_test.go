package prices

import (
	"bytes"
	"context"
	"os"
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
		if checkParsed(t, name, true, b, err) && b.Origin.Format == "" {
			t.Fatalf("%d bars, format %q", b.Len(), b.Origin.Format)
		}
	})
}
