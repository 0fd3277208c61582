package prices

import (
	"bytes"
	"context"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

var updateFixtures = flag.Bool("update-fixtures", false, "rewrite testdata/formats/btcusd_h1.parquet from btcusd_h1.csv")

// pqBar is a Parquet row of bars as a researcher might write it: the
// column names capitalised, the time a TIMESTAMP in milliseconds.
type pqBar struct {
	Time   int64   `parquet:"Time,timestamp(millisecond)"`
	Open   float64 `parquet:"Open"`
	High   float64 `parquet:"High"`
	Low    float64 `parquet:"Low"`
	Close  float64 `parquet:"Close"`
	Volume float64 `parquet:"Volume"`
}

// pqNullable has an optional price column.
type pqNullable struct {
	Time  int64    `parquet:"time,timestamp(millisecond)"`
	Open  float64  `parquet:"open"`
	High  *float64 `parquet:"high,optional"`
	Low   float64  `parquet:"low"`
	Close float64  `parquet:"close"`
}

func writeParquet[T any](t *testing.T, rows []T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// parquetRowsOf are the bars of the text file at path as pqBar rows.
func parquetRowsOf(t *testing.T, path string) []pqBar {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseCSV(context.Background(), path, bytes.NewReader(raw), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]pqBar, b.Len())
	for i := range rows {
		rows[i] = pqBar{b.Time[i].UnixMilli(), b.Open[i], b.High[i], b.Low[i], b.Close[i], b.Volume[i]}
	}
	return rows
}

func setRow(rows []pqBar, i int, f func(*pqBar)) []pqBar {
	out := append([]pqBar(nil), rows...)
	f(&out[i])
	return out
}

func nan() float64      { return math.NaN() }
func ptr[T any](v T) *T { return &v }

// TestParquetFixtureIsTheCSVFixture: the committed Parquet fixture holds
// exactly the bars of the tab-separated one (go test -run
// TestParquetFixtureIsTheCSVFixture -update-fixtures rewrites it).
func TestParquetFixtureIsTheCSVFixture(t *testing.T) {
	if *updateFixtures {
		if err := os.WriteFile(fixParquet, writeParquet(t, parquetRowsOf(t, fixTab)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	want, err := Source{}.Bars(ctx, fixTab)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Source{}.Bars(ctx, fixParquet)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != want.Len() || !got.HasVolume {
		t.Fatalf("%d bars (volume %v), want %d with volume", got.Len(), got.HasVolume, want.Len())
	}
	for i := range want.Len() {
		if !got.Time[i].Equal(want.Time[i]) || got.Open[i] != want.Open[i] || got.High[i] != want.High[i] ||
			got.Low[i] != want.Low[i] || got.Close[i] != want.Close[i] || got.Volume[i] != want.Volume[i] {
			t.Fatalf("bar %d: %v %v %v %v %v %v, want %v %v %v %v %v %v", i, got.Time[i], got.Open[i], got.High[i], got.Low[i], got.Close[i], got.Volume[i],
				want.Time[i], want.Open[i], want.High[i], want.Low[i], want.Close[i], want.Volume[i])
		}
	}
}

// TestParquetTimeTypes: the time column may be a TIMESTAMP of any unit, a
// DATE, a string, or a plain integer epoch whose unit its magnitude says;
// bid and ask give the spread; all times are UTC.
func TestParquetTimeTypes(t *testing.T) {
	t0 := utc("2024-03-01 10:00:00")
	t1 := t0.Add(time.Hour)
	type ns struct {
		Timestamp int64   `parquet:"timestamp,timestamp(nanosecond)"`
		Open      float64 `parquet:"open"`
		High      float64 `parquet:"high"`
		Low       float64 `parquet:"low"`
		Close     float64 `parquet:"close"`
	}
	type str struct {
		Date  string  `parquet:"date"`
		Open  float32 `parquet:"open"`
		High  float32 `parquet:"high"`
		Low   float32 `parquet:"low"`
		Close float32 `parquet:"close"`
		Bid   float64 `parquet:"bid"`
		Ask   float64 `parquet:"ask"`
	}
	type epoch struct {
		Datetime int64 `parquet:"datetime"`
		Open     int64 `parquet:"open"`
		High     int64 `parquet:"high"`
		Low      int64 `parquet:"low"`
		Close    int64 `parquet:"close"`
		Vol      int32 `parquet:"vol"`
	}
	type day struct {
		Date  int32   `parquet:"date,date"`
		Open  float64 `parquet:"open"`
		High  float64 `parquet:"high"`
		Low   float64 `parquet:"low"`
		Close float64 `parquet:"close"`
	}
	d0 := utc("2024-03-01 00:00:00")
	cases := []struct {
		name   string
		raw    []byte
		times  [2]time.Time
		spread bool
	}{
		{"timestamp ns", writeParquet(t, []ns{{t0.UnixNano(), 1, 2, 1, 1.5}, {t1.UnixNano(), 1, 2, 1, 1.5}}), [2]time.Time{t0, t1}, false},
		{"string and bid/ask", writeParquet(t, []str{{"2024-03-01 10:00:00", 1, 2, 1, 1.5, 1.0, 1.01}, {"2024-03-01T11:00:00Z", 1, 2, 1, 1.5, 1.2, 1.2}}), [2]time.Time{t0, t1}, true},
		{"epoch seconds", writeParquet(t, []epoch{{t0.Unix(), 1, 2, 1, 2, 5}, {t1.Unix(), 1, 2, 1, 2, 5}}), [2]time.Time{t0, t1}, false},
		{"epoch ms", writeParquet(t, []epoch{{t0.UnixMilli(), 1, 2, 1, 2, 5}, {t1.UnixMilli(), 1, 2, 1, 2, 5}}), [2]time.Time{t0, t1}, false},
		{"epoch µs", writeParquet(t, []epoch{{t0.UnixMicro(), 1, 2, 1, 2, 5}, {t1.UnixMicro(), 1, 2, 1, 2, 5}}), [2]time.Time{t0, t1}, false},
		{"epoch ns", writeParquet(t, []epoch{{t0.UnixNano(), 1, 2, 1, 2, 5}, {t1.UnixNano(), 1, 2, 1, 2, 5}}), [2]time.Time{t0, t1}, false},
		{"date", writeParquet(t, []day{{int32(d0.Unix() / 86400), 1, 2, 1, 2}, {int32(d0.Unix()/86400) + 1, 1, 2, 1, 2}}), [2]time.Time{d0, d0.Add(24 * time.Hour)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := ParseParquet(context.Background(), "x.parquet", c.raw, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != 2 || !b.Time[0].Equal(c.times[0]) || !b.Time[1].Equal(c.times[1]) || b.Time[0].Location() != time.UTC {
				t.Fatalf("times %v, want %v UTC", b.Time, c.times)
			}
			if (b.Spread != nil) != c.spread {
				t.Fatalf("spread %v, want %v", b.Spread, c.spread)
			}
			if c.spread && (!relNear(b.Spread[0], 0.01, 1e-9) || b.Spread[1] != 0) {
				t.Errorf("spread %v, want [0.01 0]", b.Spread)
			}
		})
	}
}

// TestParquetBounds: a file of more rows than MaxBars, or whose columns
// decompress to more than MaxBytes, is refused before a value is read;
// an ask below its bid is refused with its row.
func TestParquetBounds(t *testing.T) {
	rows := parquetRowsOf(t, fixTab)
	raw := writeParquet(t, rows)
	if _, err := ParseParquet(context.Background(), "x.parquet", raw, Limits{MaxBars: 100}); err == nil ||
		!strings.Contains(err.Error(), "199 rows, more than the limit of 100 bars") {
		t.Errorf("199 rows under a limit of 100 bars: %v", err)
	}
	// Compressed columns: the file is far smaller than what they
	// decompress to, which is what counts.
	flat := make([]pqBar, 5000)
	for i := range flat {
		flat[i] = pqBar{Time: int64(i) * 1000, Open: 1, High: 1, Low: 1, Close: 1}
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[pqBar](&buf, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write(flat); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw = buf.Bytes()
	f, err := parquet.OpenFile(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var unpacked int64
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			unpacked += c.MetaData.TotalUncompressedSize
		}
	}
	if unpacked < 2*int64(len(raw)) {
		t.Fatalf("the columns decompress to %d bytes, the file is %d: the test needs a file that compresses", unpacked, len(raw))
	}
	lim := Limits{MaxBytes: int64(len(raw)) + 1}
	if _, err := ParseParquet(context.Background(), "x.parquet", raw, lim); err == nil ||
		!strings.Contains(err.Error(), "decompress to") {
		t.Errorf("a %d-byte file whose columns decompress to %d bytes, under a %d-byte limit: %v", len(raw), unpacked, lim.MaxBytes, err)
	}
	type q struct {
		Time  int64   `parquet:"time,timestamp(millisecond)"`
		Open  float64 `parquet:"open"`
		High  float64 `parquet:"high"`
		Low   float64 `parquet:"low"`
		Close float64 `parquet:"close"`
		Bid   float64 `parquet:"bid"`
		Ask   float64 `parquet:"ask"`
	}
	_, err = ParseParquet(context.Background(), "x.parquet", writeParquet(t, []q{{1000, 1, 2, 1, 1, 1, 1.1}, {2000, 1, 2, 1, 1, 1.1, 1}}), Limits{})
	if err == nil || !strings.Contains(err.Error(), `x.parquet:2: column "ask": ask 1 is below the bid 1.1`) {
		t.Errorf("ask below bid in row 2: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.parquet"), append([]byte("PAR1"), bytes.Repeat([]byte{7}, 64)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sourceAt(t, dir).Bars(context.Background(), filepath.Join(dir, "broken.parquet")); err == nil ||
		!strings.Contains(err.Error(), "not a readable Parquet file") {
		t.Errorf("a file of Parquet's magic and garbage: %v", err)
	}
}
