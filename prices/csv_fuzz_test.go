package prices

import (
	"bytes"
	"context"
	"testing"
)

// FuzzParseCSVAcceptsOnlyValidBars feeds arbitrary bytes to ParseCSV. It
// must never panic; a rejection is a *ParseError (or a read error) that
// names the file, and an accepted file holds at least one bar, in strictly
// increasing time, with finite positive prices, low ≤ open, close ≤ high
// and a non-negative volume: the promises of ParseCSV's doc comment.
// Seeds: testdata/fuzz/FuzzParseCSVAcceptsOnlyValidBars and the f.Add calls.
func FuzzParseCSVAcceptsOnlyValidBars(f *testing.F) {
	for _, s := range []string{
		"time,open,high,low,close,volume\n2024-01-02 10:00:00,10,11,9,10.5,100\n2024-01-02 11:00:00,10.5,12,10,11,50\n",
		"Date\tOpen\tHigh\tLow\tClose\n2024-01-02\t1\t2\t0.5\t1.5\n2024-01-03\t1.5\t2\t1\t1\n",
		"\xef\xbb\xbfunix,open,high,low,close\r\n1700000000,1,1,1,1\r\n\r\n1700003600,1,2,1,2\r\n",
		"timestamp,close,low,high,open,vol\n2024-01-02T10:00:00Z,5,4,6,5,0\n",
		"time,open,high,low,close\n2024-01-02 10:00:00+02:00,1,2,1,NaN\n",
		"time,open,high,low,close\n2024-01-02,1,2,1,1\n2024-01-02,1,2,1,1\n",
		"time,open,\"high\nx\",low,close\n\"2024\",1,2,1,1\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		const name = "fuzz.csv"
		b, err := ParseCSV(context.Background(), name, bytes.NewReader(raw), Limits{})
		checkParsed(t, name, false, b, err)
	})
}
