package prices

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/files"
)

// The fixtures of every corpus format (docs/adr/0035-corpus-formats.md),
// small slices of the corpus files: the first 200 lines of
// hourly/BTCUSD_H1.csv and h4-forex/AUDCHF_H4.csv, AAPL's LEAN hour bars of
// 2014-05-01 to 2014-06-20 (the 7:1 split of 2014-06-09 inside) with the
// rows of its factor file that apply, VXX's first 60 (no factor file),
// EUR/USD's first 200 LEAN bid/ask bars, and the BTCUSD slice as Parquet
// (parquet_test.go writes it).
const (
	fixTab        = "testdata/formats/btcusd_h1.csv"
	fixHeaderless = "testdata/formats/audchf_h4.csv"
	fixParquet    = "testdata/formats/btcusd_h1.parquet"
	fixAAPL       = "testdata/lean/equity-aapl.zip"
	fixVXX        = "testdata/lean/equity-vxx.zip"
	fixEURUSD     = "testdata/lean/forex-eurusd.zip"
)

// TestFormatEachFixtureLoads: each format is found from its content (the
// fixtures copied under names that say nothing, "data.bin") and loads
// with the bars, times and prices the file holds.
func TestFormatEachFixtureLoads(t *testing.T) {
	cases := []struct {
		path      string
		format    Format
		bars      int
		first     time.Time
		open      float64 // of the first bar
		hasVolume bool
		spread    bool
		adjusted  bool
	}{
		{fixTab, FormatText, 199, utc("2017-05-23 00:00:00"), 2104.6, true, false, false},
		{fixHeaderless, FormatHeaderless, 200, utc("2007-08-29 20:00:00"), 0.9814, true, false, false},
		{fixParquet, FormatParquet, 199, utc("2017-05-23 00:00:00"), 2104.6, true, false, false},
		// 2014-05-01 09:00 New York (EDT) is 13:00 UTC; 592.00 raw × 0.8961764 × 0.0357143.
		{fixAAPL, FormatLeanEquity, 252, utc("2014-05-01 13:00:00"), 592.0 * 0.8961764 * 0.0357143, true, false, true},
		// 2009-01-30 09:00 New York (EST) is 14:00 UTC.
		{fixVXX, FormatLeanEquity, 60, utc("2009-01-30 14:00:00"), 0, true, false, false},
		// (1.31927 + 1.32027) / 2; LEAN forex times are UTC.
		{fixEURUSD, FormatLeanForex, 200, utc("2007-01-01 21:00:00"), 1.31977, false, true, false},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "data.bin")
			copyFile(t, c.path, p)
			if c.format == FormatLeanEquity && c.adjusted {
				copyFile(t, "testdata/lean/factor_files/aapl.csv", filepath.Join(dir, "factor_files", "aapl.csv"))
			}
			b, err := sourceAt(t, dir).Bars(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if b.Origin.Format != c.format || b.Origin.Adjusted != c.adjusted {
				t.Errorf("origin %+v, want format %s, adjusted %v", b.Origin, c.format, c.adjusted)
			}
			if b.Len() != c.bars {
				t.Errorf("%d bars, want %d", b.Len(), c.bars)
			}
			if !b.Time[0].Equal(c.first) || b.Time[0].Location() != time.UTC {
				t.Errorf("first time %v, want %v UTC", b.Time[0], c.first)
			}
			if c.open != 0 && !relNear(b.Open[0], c.open, 1e-12) {
				t.Errorf("first open %.10g, want %.10g", b.Open[0], c.open)
			}
			if b.HasVolume != c.hasVolume || (b.Spread != nil) != c.spread {
				t.Errorf("HasVolume %v, Spread %v; want %v, %v", b.HasVolume, b.Spread != nil, c.hasVolume, c.spread)
			}
			if c.spread && len(b.Spread) != b.Len() {
				t.Errorf("%d spreads for %d bars", len(b.Spread), b.Len())
			}
			if c.format == FormatLeanEquity && !c.adjusted && !strings.Contains(b.Origin.Note, "not adjusted") {
				t.Errorf("a LEAN equity without a factor file says %q, want that it is not adjusted", b.Origin.Note)
			}
		})
	}
}

// TestFormatBadFilesFailWithTheirMessage: every kind of bad file, in every
// format, fails with a *ParseError naming the file, the line (or Parquet
// row) and the reason, and no bars: a garbage row, times that go back or
// repeat, NaN, a price that is not positive, high below low, ask below
// bid, a zip that is not one CSV, and a file of no known format.
func TestFormatBadFilesFailWithTheirMessage(t *testing.T) {
	tab := readLines(t, fixTab)
	hl := readLines(t, fixHeaderless)
	eq := zipLines(t, fixAAPL)
	fx := zipLines(t, fixEURUSD)
	pq := parquetRowsOf(t, fixTab)
	type file struct {
		name string
		raw  []byte
	}
	text := func(name string, lines []string) file { return file{name, []byte(strings.Join(lines, "\n") + "\n")} }
	lean := func(name, entry string, lines []string) file {
		return file{name, zipOf(t, map[string]string{entry: strings.Join(lines, "\n") + "\n"})}
	}
	gz := func() []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write([]byte(strings.Join(tab, "\n")))
		w.Close()
		return buf.Bytes()
	}()
	cases := []struct {
		what string
		f    file
		line int // 0: the whole file
		want []string
	}{
		// Headered tab text (ParseCSV).
		{"text garbage row", text("t.csv", set(tab, 5, "\t", -1, "garbage")), 5, []string{"has 1 fields, the header has 6"}},
		{"text time goes back", text("t.csv", set(tab, 10, "\t", 0, "2017-05-23 02:00:00")), 10, []string{"not after the previous bar's"}},
		{"text duplicate time", text("t.csv", set(tab, 10, "\t", 0, fieldOf(tab[8], "\t", 0))), 10, []string{"not after the previous bar's"}},
		{"text NaN", text("t.csv", set(tab, 7, "\t", 4, "NaN")), 7, []string{`"Close"`, "not finite"}},
		{"text price not positive", text("t.csv", set(tab, 7, "\t", 3, "-1")), 7, []string{`"Low"`, "not positive"}},
		{"text high below low", text("t.csv", set(tab, 7, "\t", 2, "1")), 7, []string{`"High"`, "below low"}},
		// Headerless comma text.
		{"headerless garbage row", text("h.csv", set(hl, 5, ",", -1, "2007-08-30 12:00,1,2")), 5, []string{"has 3 fields, the file's first row has 6"}},
		{"headerless bad number", text("h.csv", set(hl, 5, ",", 2, "x1")), 5, []string{`"high"`, `cannot parse "x1"`}},
		{"headerless time goes back", text("h.csv", set(hl, 10, ",", 0, "2007-08-29 20:00")), 10, []string{`"time"`, "before the previous bar's"}},
		{"headerless duplicate time", text("h.csv", set(hl, 10, ",", 0, fieldOf(hl[8], ",", 0))), 10, []string{"the same as the previous bar's"}},
		{"headerless NaN", text("h.csv", set(hl, 7, ",", 1, "NaN")), 7, []string{`"open"`, "not finite"}},
		{"headerless price not positive", text("h.csv", set(hl, 7, ",", 4, "0")), 7, []string{`"close"`, "not positive"}},
		{"headerless high below low", text("h.csv", set(hl, 7, ",", 2, "0.5")), 7, []string{`"high"`, "below low"}},
		// LEAN equity zip.
		{"lean equity garbage row", lean("e.zip", "aapl.csv", set(eq, 3, ",", -1, "20140501 11:00,1,2")), 3, []string{"has 3 fields, want 6"}},
		{"lean equity bad time", lean("e.zip", "aapl.csv", set(eq, 3, ",", 0, "2014-05-01 11:00")), 3, []string{`"time"`, "YYYYMMDD HH:MM"}},
		{"lean equity time goes back", lean("e.zip", "aapl.csv", set(eq, 9, ",", 0, "20140501 09:00")), 9, []string{"before the previous bar's"}},
		{"lean equity duplicate time", lean("e.zip", "aapl.csv", set(eq, 9, ",", 0, fieldOf(eq[7], ",", 0))), 9, []string{"the same as the previous bar's"}},
		{"lean equity NaN", lean("e.zip", "aapl.csv", set(eq, 4, ",", 4, "NaN")), 4, []string{`"close"`, "not finite"}},
		{"lean equity price not positive", lean("e.zip", "aapl.csv", set(eq, 4, ",", 3, "0")), 4, []string{`"low"`, "not positive"}},
		{"lean equity high below low", lean("e.zip", "aapl.csv", set(eq, 4, ",", 2, "1")), 4, []string{`"high"`, "below low"}},
		{"lean zip of two entries", file{"e.zip", zipOf(t, map[string]string{"aapl.csv": eq[0] + "\n", "b.csv": eq[1] + "\n"})}, 0, []string{"exactly one regular .csv entry", "holds 2 .csv"}},
		{"lean zip without a csv", file{"e.zip", zipOf(t, map[string]string{"aapl.txt": eq[0] + "\n"})}, 0, []string{"exactly one regular .csv entry", "0 .csv and 1 other"}},
		{"lean zip entry not a ticker", file{"e.zip", zipOf(t, map[string]string{"a\x1bb.csv": eq[0] + "\n"})}, 0, []string{`zip entry "a\x1bb.csv": want a ticker's name`}},
		{"lean zip of another layout", lean("e.zip", "aapl.csv", []string{"20140501 09:00,1,2,3"}), 1, []string{"4 comma-separated fields", "6 (equity", "11 (forex"}},
		// LEAN forex zip.
		{"lean forex ask below bid", lean("f.zip", "eurusd.csv", set(set(fx, 6, ",", 6, "1.3"), 6, ",", 8, "1.3")), 6, []string{`"ask open"`, "below the bid"}},
		{"lean forex bid high below low", lean("f.zip", "eurusd.csv", set(fx, 6, ",", 2, "1.2")), 6, []string{`"bid high"`, "below low"}},
		{"lean forex NaN", lean("f.zip", "eurusd.csv", set(fx, 6, ",", 9, "NaN")), 6, []string{`"ask close"`, "not finite"}},
		{"lean forex time goes back", lean("f.zip", "eurusd.csv", set(fx, 6, ",", 0, "20070101 21:00")), 6, []string{"before the previous bar's"}},
		// Parquet (the line is the row).
		{"parquet time goes back", file{"p.parquet", writeParquet(t, setRow(pq, 10, func(r *pqBar) { r.Time = pq[2].Time }))}, 11, []string{`"Time"`, "before the previous bar's"}},
		{"parquet duplicate time", file{"p.parquet", writeParquet(t, setRow(pq, 10, func(r *pqBar) { r.Time = pq[9].Time }))}, 11, []string{"the same as the previous bar's"}},
		{"parquet NaN", file{"p.parquet", writeParquet(t, setRow(pq, 4, func(r *pqBar) { r.Close = nan() }))}, 5, []string{`"Close"`, "not finite"}},
		{"parquet price not positive", file{"p.parquet", writeParquet(t, setRow(pq, 4, func(r *pqBar) { r.Open = 0 }))}, 5, []string{`"Open"`, "not positive"}},
		{"parquet high below low", file{"p.parquet", writeParquet(t, setRow(pq, 4, func(r *pqBar) { r.High = r.Low / 2 }))}, 5, []string{`"High"`, "below low"}},
		{"parquet missing column", file{"p.parquet", writeParquet(t, []struct {
			Time int64   `parquet:"time,timestamp(millisecond)"`
			Open float64 `parquet:"open"`
		}{{1, 1}})}, 0, []string{"missing column high, low, close", "of which time, open are known"}},
		{"parquet null price", file{"p.parquet", writeParquet(t, []pqNullable{{Time: 1000, Open: 1, High: ptr(2.0), Low: 1, Close: 1}, {Time: 2000, Open: 1, Low: 1, Close: 1}})}, 2, []string{`"high"`, "is null"}},
		// Not a price file at all.
		{"gzip", file{"t.csv", gz}, 0, []string{"not a price file", "(1f 8b", "gzip"}},
		{"png", file{"t.csv", []byte("\x89PNG\r\n\x1a\nIHDR....")}, 0, []string{"not a price file", "PNG image"}},
		{"binary", file{"t.csv", []byte("\x01\x02SECRET\x00\x03")}, 0, []string{"not a price file", "NUL byte", "(01 02 53 45 43 52 45 54 …)"}},
		{"text of no known columns", text("t.csv", []string{"user:x:1000", "root:x:0"}), 1, []string{"missing column time", "none of them a known column"}},
		{"the CSV out of a LEAN zip", text("aapl.csv", eq[:3]), 1, []string{"missing column time", "looks like a row of a LEAN hour or daily file", "load the LEAN zip"}},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, c.f.name)
			if err := os.WriteFile(p, c.f.raw, 0o644); err != nil {
				t.Fatal(err)
			}
			b, err := sourceAt(t, dir).Bars(context.Background(), p)
			if b != nil {
				t.Errorf("bars (%d) beside the error %v", b.Len(), err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *ParseError", err, err)
			}
			if !strings.HasPrefix(pe.File, p) || pe.Line != c.line {
				t.Errorf("error at %s:%d, want %s:%d: %v", pe.File, pe.Line, p, c.line, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "root:x") {
				t.Errorf("the error repeats the file: %v", err)
			}
		})
	}
}

// TestFormatZipBoundsAreTheDecompressedSize: a LEAN zip is bounded by what
// it decompresses to, not its size on disk: a zip whose entry inflates
// past MaxBytes is refused (by the size its header claims, and, when the
// header lies, by the read), though the zip is far below the limit.
func TestFormatZipBoundsAreTheDecompressedSize(t *testing.T) {
	dir := t.TempDir()
	line := "20140501 09:00,5939000,5950000,5930000,5940000,100\n"
	big := strings.Repeat(line, 200) // 10,200 bytes, compresses to a few hundred
	p := filepath.Join(dir, "bomb.zip")
	raw := zipOf(t, map[string]string{"aapl.csv": big})
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	lim := Limits{MaxBytes: 4096}
	if int64(len(raw)) > lim.MaxBytes {
		t.Fatalf("the zip is %d bytes: the test needs it below %d", len(raw), lim.MaxBytes)
	}
	src := sourceAt(t, dir)
	src.Limits = lim
	_, err := src.Bars(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "decompresses to 10200 bytes, more than the limit of 4096") {
		t.Errorf("a zip of 10,200 decompressed bytes under a 4,096-byte limit: %v", err)
	}
	// The same entry with a central directory that claims 100 bytes: the
	// read fails all the same (archive/zip stops at the size claimed).
	liar := bytes.Clone(raw)
	cd := bytes.LastIndex(liar, []byte("PK\x01\x02"))
	copy(liar[cd+24:], []byte{100, 0, 0, 0}) // the uncompressed size, little-endian
	if err := os.WriteFile(p, liar, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := src.Bars(context.Background(), p); err == nil || b != nil {
		t.Errorf("a zip whose header understates its entry: %d bars, error %v", b.Len(), err)
	}
}

// TestFormatHonoursCancellation: a cancelled context stops every format's
// read with ctx's error.
func TestFormatHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	var lines []string
	start := time.Date(2014, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10_000 {
		lines = append(lines, start.Add(time.Duration(i)*time.Hour).Format("2006-01-02 15:04")+",1,2,1,1.5,10")
	}
	var eq []string // daily: New York's clock changes skip no bar
	for i := range 10_000 {
		eq = append(eq, start.Add(time.Duration(i)*24*time.Hour).Format(leanTimeLayout)+",10000,20000,10000,15000,10")
	}
	write := func(name string, raw []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var pq []pqBar
	for i := range 10 {
		pq = append(pq, pqBar{Time: int64(i) * 3_600_000, Open: 1, High: 2, Low: 1, Close: 1.5})
	}
	for _, p := range []string{
		write("h.csv", []byte(strings.Join(lines, "\n"))),
		write("e.zip", zipOf(t, map[string]string{"x.csv": strings.Join(eq, "\n")})),
		write("p.parquet", writeParquet(t, pq)),
	} {
		if _, err := sourceAt(t, dir).Bars(ctx, p); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v", filepath.Base(p), err)
		}
	}
}

// sourceAt is a Source whose one root is dir.
func sourceAt(t *testing.T, dir string) Source {
	t.Helper()
	r, err := files.NewRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	return Source{Roots: r}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
}

// zipLines are the lines of the one entry of the zip at path.
func zipLines(t *testing.T, path string) []string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	rc, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
}

// zipOf is a zip archive of the entries (name → content), deflated, in
// name order.
func zipOf(t *testing.T, entries map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f, err := w.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(entries[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// set returns a copy of lines with field k of the 1-based line n (split at
// sep) replaced by v; k < 0 replaces the whole line.
func set(lines []string, n int, sep string, k int, v string) []string {
	out := append([]string(nil), lines...)
	if k < 0 {
		out[n-1] = v
		return out
	}
	f := strings.Split(out[n-1], sep)
	f[k] = v
	out[n-1] = strings.Join(f, sep)
	return out
}

// fieldOf is field k of line.
func fieldOf(line, sep string, k int) string { return strings.Split(line, sep)[k] }

func relNear(a, b, tol float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	m := b
	if m < 0 {
		m = -m
	}
	return d <= tol*max(m, 1e-300)
}

// TestFormatCheckAcceptsZipAndParquet: Source.Check, which every run
// makes before training, lets a LEAN zip and a Parquet file through (their
// first bytes hold NUL bytes, which it refuses in a text file) and still
// refuses binary data of no known format.
func TestFormatCheckAcceptsZipAndParquet(t *testing.T) {
	for _, p := range []string{fixAAPL, fixEURUSD, fixParquet, fixHeaderless} {
		cfg := config.Defaults()
		cfg.Data.Path = p
		if err := (Source{}).Check(cfg); err != nil {
			t.Errorf("Check(%s): %v", p, err)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "x.bin")
	if err := os.WriteFile(p, []byte("\x01\x02\x00\x03"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Data.Path = p
	if err := sourceAt(t, dir).Check(cfg); err == nil || !strings.Contains(err.Error(), "NUL byte") {
		t.Errorf("Check of binary data: %v, want the NUL byte refused", err)
	}
}
