package prices

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/files"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05", s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestLoadBundledFiles loads both bundled files and checks the row counts,
// the first and last bars against the files' READMEs and the bar density.
func TestLoadBundledFiles(t *testing.T) {
	cases := []struct {
		path                    string
		rows                    int
		first, last             time.Time
		open, high, low, close_ float64
		volume                  float64
		perYearLo, perYearHi    float64
	}{
		{"bundled:USA500IDXUSD_H1.csv", 53257, utc("2013-05-23 00:00:00"), utc("2023-09-11 09:00:00"),
			1658.773, 1659.897, 1655.867, 1656.772, 60, 5000, 5400},
		// Column order low,high,open,close; the date column has a +00:00 offset.
		{"bundled:bitcoin_2024.csv", 6115, utc("2023-12-31 23:00:00"), utc("2024-09-11 17:00:00"),
			42252.3, 42339.7, 42066.35, 42288.06, 626.73889224, 8765, 8767},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			b, err := Source{}.Bars(context.Background(), c.path)
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != c.rows || len(b.Time) != c.rows || len(b.Volume) != c.rows {
				t.Fatalf("rows = %d, want %d", b.Len(), c.rows)
			}
			if !b.Time[0].Equal(c.first) || b.Time[0].Location() != time.UTC {
				t.Errorf("first time = %v, want %v UTC", b.Time[0], c.first)
			}
			if !b.Time[c.rows-1].Equal(c.last) {
				t.Errorf("last time = %v, want %v", b.Time[c.rows-1], c.last)
			}
			got := [5]float64{b.Open[0], b.High[0], b.Low[0], b.Close[0], b.Volume[0]}
			want := [5]float64{c.open, c.high, c.low, c.close_, c.volume}
			if got != want {
				t.Errorf("first bar OHLCV = %v, want %v", got, want)
			}
			if !b.HasVolume || b.Name != c.path {
				t.Errorf("HasVolume = %v, Name = %q", b.HasVolume, b.Name)
			}
			if py := b.BarsPerYear(); py < c.perYearLo || py > c.perYearHi {
				t.Errorf("BarsPerYear = %.1f, want in [%g, %g]", py, c.perYearLo, c.perYearHi)
			}
		})
	}
}

func TestLoadCSVFromDisk(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bars.csv")
	if err := os.WriteFile(path, []byte("time,open,high,low,close\n2024-01-01,10,11,9,10.5\n2024-01-02,10.5,12,10,11\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := files.NewRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Roots: roots}
	for _, p := range []string{path, "bars.csv"} { // absolute, and relative to the root
		b, err := src.Bars(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if b.Len() != 2 || b.HasVolume || b.Volume[1] != 0 || b.Close[1] != 11 {
			t.Errorf("got %d bars, HasVolume %v, volume %v, close %v", b.Len(), b.HasVolume, b.Volume[1], b.Close[1])
		}
	}
	_, err = src.Bars(context.Background(), filepath.Join(dir, "missing.csv"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist", err)
	}
	_, err = src.Bars(context.Background(), "bundled:nope.csv")
	if err == nil || !strings.Contains(err.Error(), "nope.csv") {
		t.Errorf("missing bundled file: err = %v", err)
	}
}

// TestParseCSVAcceptsFormats checks that separators, header spellings,
// column orders, line endings and time formats all give the same bars.
func TestParseCSVAcceptsFormats(t *testing.T) {
	t0, t1 := utc("2024-03-01 10:00:00"), utc("2024-03-01 11:00:00")
	cases := []struct {
		name, in string
		t0, t1   time.Time
		volume   bool
	}{
		{"comma", "time,open,high,low,close,volume\n2024-03-01 10:00:00,10,11,9,10.5,5\n2024-03-01 11:00:00,10.5,12,10,11,6\n", t0, t1, true},
		{"tab no trailing newline", "Time\tOpen\tHigh\tLow\tClose\tVolume\n2024-03-01 10:00:00\t10\t11\t9\t10.5\t5\n2024-03-01 11:00:00\t10.5\t12\t10\t11\t6", t0, t1, true},
		{"BOM CRLF blank trailing lines", "\ufeffDate,Open,High,Low,Close,Vol\r\n2024-03-01 10:00:00,10,11,9,10.5,5\r\n2024-03-01 11:00:00,10.5,12,10,11,6\r\n\r\n\r\n", t0, t1, true},
		{"any order, extra columns, spaces", " close , symbol, LOW,HIGH,Open , datetime\n10.5,X,9,11,10,2024-03-01 10:00:00\n11,X,10,12,10.5,2024-03-01 11:00:00\n", t0, t1, false},
		{"offset converted to UTC", "timestamp,open,high,low,close\n2024-03-01 12:00:00+02:00,10,11,9,10.5\n2024-03-01T06:00:00-05:00,10.5,12,10,11\n", t0, t1, false},
		{"RFC 3339 and T without zone", "time,open,high,low,close\n2024-03-01T10:00:00Z,10,11,9,10.5\n2024-03-01T11:00:00,10.5,12,10,11\n", t0, t1, false},
		{"minutes only", "time,open,high,low,close\n2024-03-01 10:00,10,11,9,10.5\n2024-03-01 11:00,10.5,12,10,11\n", t0, t1, false},
		{"date only", "date,open,high,low,close\n2024-03-01,10,11,9,10.5\n2024-03-02,10.5,12,10,11\n", utc("2024-03-01 00:00:00"), utc("2024-03-02 00:00:00"), false},
		{"unix only", "unix,open,high,low,close\n1709287200,10,11,9,10.5\n1709290800,10.5,12,10,11\n", t0, t1, false},
		{"time column holding epoch seconds", "time,open,high,low,close\n1709287200,10,11,9,10.5\n1709290800,10.5,12,10,11\n", t0, t1, false},
		// The string column wins over epoch seconds, wherever it stands.
		{"prefer string time", "unix,timestamp,open,high,low,close\n1,2024-03-01 10:00:00,10,11,9,10.5\n2,2024-03-01 11:00:00,10.5,12,10,11\n", t0, t1, false},
		{"prefer string time over numeric time", "time,date,open,high,low,close\n1,2024-03-01 10:00:00,10,11,9,10.5\n2,2024-03-01 11:00:00,10.5,12,10,11\n", t0, t1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := ParseCSV(context.Background(), c.name, strings.NewReader(c.in), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != 2 {
				t.Fatalf("rows = %d, want 2", b.Len())
			}
			if !b.Time[0].Equal(c.t0) || !b.Time[1].Equal(c.t1) || b.Time[0].Location() != time.UTC {
				t.Errorf("times = %v, %v; want %v, %v in UTC", b.Time[0], b.Time[1], c.t0, c.t1)
			}
			got := [4]float64{b.Open[0], b.High[0], b.Low[0], b.Close[0]}
			if got != [4]float64{10, 11, 9, 10.5} || b.Close[1] != 11 {
				t.Errorf("first bar OHLC = %v, second close %v", got, b.Close[1])
			}
			if b.HasVolume != c.volume || (c.volume && b.Volume[1] != 6) {
				t.Errorf("HasVolume = %v, volume = %v", b.HasVolume, b.Volume)
			}
		})
	}
}

// TestParseCSVRejectsBadInput checks that each kind of bad input is a
// *ParseError naming the line, the column and the reason.
func TestParseCSVRejectsBadInput(t *testing.T) {
	const hdr = "time,open,high,low,close,volume\n"
	const row1 = "2024-01-01 00:00:00,10,11,9,10,1\n"
	cases := []struct {
		name, in string
		line     int
		column   string
		reason   string
	}{
		{"empty file", "", 0, "", "empty file"},
		{"BOM and blank lines only", "\ufeff\r\n\n", 0, "", "empty file"},
		{"header only", hdr, 1, "", "no bars"},
		{"missing close", "time,open,high,low\n2024-01-01,1,1,1\n", 1, "close", "missing column close"},
		{"missing time", "open,high,low,close\n1,1,1,1\n", 1, "time", "missing column time"},
		{"duplicate open", "time,open,high,low,close,open\n", 1, "open", "twice"},
		{"too few fields", hdr + row1 + "2024-01-01 01:00:00,10,11,9,10\n", 3, "", "has 5 fields, the header has 6"},
		{"too many fields", hdr + "2024-01-01 00:00:00,10,11,9,10,1,7\n", 2, "", "has 7 fields"},
		{"bad number", hdr + row1 + "2024-01-01 01:00:00,10,1x1,9,10,1\n", 3, "high", `cannot parse "1x1" as a number`},
		{"empty number", hdr + "2024-01-01 00:00:00,10,11,,10,1\n", 2, "low", `cannot parse "" as a number`},
		{"NaN", hdr + "2024-01-01 00:00:00,NaN,11,9,10,1\n", 2, "open", "not finite"},
		{"Inf", hdr + row1 + "2024-01-01 01:00:00,10,11,9,10,+Inf\n", 3, "volume", "not finite"},
		{"zero price", hdr + "2024-01-01 00:00:00,0,11,0,10,1\n", 2, "open", "not positive"},
		{"negative price", hdr + "2024-01-01 00:00:00,10,11,-9,10,1\n", 2, "low", "not positive"},
		{"high below low", hdr + "2024-01-01 00:00:00,10,9,11,10,1\n", 2, "high", "below low"},
		{"open above high", hdr + "2024-01-01 00:00:00,12,11,9,10,1\n", 2, "open", "outside [low 9, high 11]"},
		{"close below low", hdr + "2024-01-01 00:00:00,10,11,9,8.5,1\n", 2, "close", "outside"},
		{"negative volume", hdr + "2024-01-01 00:00:00,10,11,9,10,-1\n", 2, "volume", "negative"},
		{"bad time", hdr + row1 + "2024-13-01 00:00:00,10,11,9,10,1\n", 3, "time", "cannot parse time"},
		{"repeated time", hdr + row1 + row1, 3, "time", "not after the previous bar"},
		{"time going back", hdr + row1 + "2023-12-31 23:00:00,10,11,9,10,1\n", 3, "time", "not after"},
		{"stray quote", hdr + row1 + "2024-01-01 01:00:00,1\"0,11,9,10,1\n", 3, "", "quote"},
		{"CRLF line numbers", strings.ReplaceAll(hdr+row1+"\n2024-01-01 01:00:00,10,11,9,x,1\n", "\n", "\r\n"), 4, "close", "cannot parse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := ParseCSV(context.Background(), "in.csv", strings.NewReader(c.in), Limits{})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (bars %v), want *ParseError", err, b)
			}
			if pe.File != "in.csv" || pe.Line != c.line || pe.Column != c.column || !strings.Contains(pe.Reason, c.reason) {
				t.Errorf("got %+v, want line %d column %q reason containing %q", *pe, c.line, c.column, c.reason)
			}
			if !strings.Contains(err.Error(), "in.csv") {
				t.Errorf("message %q does not name the file", err)
			}
		})
	}
}

// TestBarsPerYear checks the density formula on hand-worked series.
func TestBarsPerYear(t *testing.T) {
	year := time.Duration(365.25 * 24 * float64(time.Hour))
	t0 := utc("2020-01-01 00:00:00")
	b := &Bars{Time: []time.Time{t0, t0.Add(year / 3), t0.Add(year)}, Close: []float64{1, 1, 1}}
	if got := b.BarsPerYear(); math.Abs(got-2) > 1e-12 {
		t.Errorf("3 bars over one year: BarsPerYear = %v, want 2", got)
	}
	hourly := &Bars{}
	for i := range 1000 {
		hourly.Time = append(hourly.Time, t0.Add(time.Duration(i)*time.Hour))
		hourly.Close = append(hourly.Close, 1)
	}
	if got := hourly.BarsPerYear(); math.Abs(got-8766) > 1e-6 {
		t.Errorf("gapless hourly: BarsPerYear = %v, want 8766", got)
	}
	if got := (&Bars{Time: []time.Time{t0}, Close: []float64{1}}).BarsPerYear(); got != 0 {
		t.Errorf("one bar: BarsPerYear = %v, want 0", got)
	}
}
