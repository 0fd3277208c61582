package prices

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"time"
)

// Format is a kind of price file Source.Bars reads. It is found from the
// file's first bytes, never from its name
// (docs/adr/0035-corpus-formats.md):
//
//  1. "PK\x03\x04" (a zip archive): a LEAN zip (FormatLeanEquity or
//     FormatLeanForex, told apart by the fields of its first row; lean.go);
//  2. "PAR1": Apache Parquet (FormatParquet; parquet.go);
//  3. the magic number of another binary format (gzip, 7z, PDF, ...), or a
//     NUL byte among the first bytes: not a price file, an error saying
//     what the bytes look like;
//  4. otherwise text: FormatHeaderless when the first line that is not
//     blank parses as a headerless data row (format_text.go), else
//     FormatText, the headered tab- or comma-separated file of ParseCSV.
type Format string

// The formats of Source.Bars.
const (
	// FormatText is a headered tab- or comma-separated file (ParseCSV).
	FormatText Format = "text"
	// FormatHeaderless is a comma-separated file without a header,
	// "YYYY-MM-DD HH:MM[:SS],open,high,low,close[,volume]" (ParseHeaderless).
	FormatHeaderless Format = "headerless"
	// FormatLeanEquity is a QuantConnect LEAN equity zip (hour or daily
	// bars; ParseLean).
	FormatLeanEquity Format = "lean-equity"
	// FormatLeanForex is a QuantConnect LEAN forex or CFD zip with bid
	// and ask bars (ParseLean).
	FormatLeanForex Format = "lean-forex"
	// FormatParquet is an Apache Parquet file of bars (ParseParquet).
	FormatParquet Format = "parquet"
)

// Origin is how a Bars was read.
type Origin struct {
	// Format is the format the file was found to be.
	Format Format `json:"format"`
	// Adjusted is true when the prices were adjusted for splits and
	// dividends on reading (a LEAN equity zip with its factor file).
	Adjusted bool `json:"adjusted"`
	// Note says what a reader of the bars must know about their prices,
	// "" when nothing: which factor file adjusted them, or that a LEAN
	// equity zip had none, so that its splits show as jumps.
	Note string `json:"note,omitempty"`
}

// Magic numbers of formats that are not price files, for the error that
// refuses them (a price file compressed with gzip, say, is named as such).
var foreignMagic = []struct {
	magic, what string
}{
	{"\x1f\x8b", "gzip data"},
	{"BZh", "bzip2 data"},
	{"\xfd7zXZ\x00", "xz data"},
	{"\x28\xb5\x2f\xfd", "zstd data"},
	{"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"},
	{"Rar!\x1a\x07", "a RAR archive"},
	{"%PDF-", "a PDF document"},
	{"\x89PNG\r\n\x1a\n", "a PNG image"},
	{"\xff\xd8\xff", "a JPEG image"},
	{"\x7fELF", "an ELF executable"},
	{"SQLite format 3\x00", "an SQLite database"},
	{"ARROW1", "an Arrow IPC file (convert it to Parquet or CSV)"},
	{"\x93NUMPY", "a NumPy array"},
	{"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an OLE document (an old Excel .xls?)"},
	{"PK\x05\x06", "an empty zip archive"},
}

// The magic numbers of the binary formats Source.Bars reads.
var (
	zipMagic     = []byte("PK\x03\x04")
	parquetMagic = []byte("PAR1")
)

// sniffLen is how many bytes decode looks at to choose a format.
const sniffLen = 512

// decode reads the price file name from r in the format its first bytes
// show (Format), within s.Limits. It returns every bar of the file or an
// error, never part of a file.
func (s Source) decode(ctx context.Context, name string, r io.Reader) (*Bars, error) {
	lim := s.Limits.withDefaults()
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, readError(name, err)
	}
	switch {
	case bytes.HasPrefix(head, zipMagic):
		raw, err := readAllBounded(name, br, lim.MaxBytes)
		if err != nil {
			return nil, err
		}
		return s.parseLeanZip(ctx, name, raw, lim, true) // sets Origin
	case bytes.HasPrefix(head, parquetMagic):
		raw, err := readAllBounded(name, br, lim.MaxBytes)
		if err != nil {
			return nil, err
		}
		b, err := ParseParquet(ctx, name, raw, lim)
		if err != nil {
			return nil, err
		}
		b.Origin.Format = FormatParquet
		return b, nil
	}
	if why := foreign(head); why != "" {
		return nil, &ParseError{File: name, Reason: "not a price file: " + why}
	}
	parse, f := ParseCSV, FormatText
	if headerless(head) {
		parse, f = ParseHeaderless, FormatHeaderless
	}
	b, err := parse(ctx, name, br, lim)
	if err != nil {
		return nil, withHint(err, head)
	}
	b.Origin.Format = f
	return b, nil
}

// foreign says what head looks like when it is the start of a file that
// is no price file of any format Source.Bars knows, else "".
func foreign(head []byte) string {
	for _, m := range foreignMagic {
		if bytes.HasPrefix(head, []byte(m.magic)) {
			return fmt.Sprintf("its first bytes %s look like %s", hexExcerpt(head), m.what)
		}
	}
	if err := checkEncoding("", head); err != nil {
		return "" // ParseCSV says what to do with UTF-16 and UTF-32
	}
	if i := bytes.IndexByte(head, 0); i >= 0 && !wideText(head) {
		return fmt.Sprintf("its first bytes %s hold a NUL byte (at byte %d): binary data in a format it does not know (want tab- or comma-separated text, a LEAN zip or Parquet)", hexExcerpt(head), i+1)
	}
	return ""
}

// leanRow matches the first line of the CSV inside a LEAN zip.
var leanRow = regexp.MustCompile(`^\d{8} \d\d:\d\d,[0-9.]+,`)

// withHint adds to a header error of ParseCSV what the file looks like
// when its first line is a LEAN row: the CSV taken out of a LEAN zip,
// whose prices (× 10,000) and time zone only the zip's reader knows.
func withHint(err error, head []byte) error {
	var pe *ParseError
	if errors.As(err, &pe) && pe.Line == 1 && strings.HasPrefix(pe.Reason, "missing column") &&
		leanRow.Match(bytes.TrimPrefix(head, utf8BOM)) {
		pe.Reason += "; its first line looks like a row of a LEAN hour or daily file (YYYYMMDD HH:MM,...): load the LEAN zip it came from, not the CSV inside it"
	}
	return err
}

// knownBinary reports whether head starts a binary format Source.Bars
// reads: a zip (LEAN) or Parquet.
func knownBinary(head []byte) bool {
	return bytes.HasPrefix(head, zipMagic) || bytes.HasPrefix(head, parquetMagic)
}

// wideText reports whether head looks like UTF-16 or UTF-32 text without
// a byte-order mark: at least 40 % NUL bytes, all others printable ASCII
// or line ends. ParseCSV's error names the encoding and says what to do.
func wideText(head []byte) bool {
	nul := 0
	for _, c := range head {
		switch {
		case c == 0:
			nul++
		case c == '\n' || c == '\r' || c == '\t' || (c >= 0x20 && c < 0x7f):
		default:
			return false
		}
	}
	return len(head) >= 4 && nul*10 >= len(head)*4
}

// hexExcerpt is the first 8 bytes of head in hex, as an error may show
// them: never more of a file that is not a price file.
func hexExcerpt(head []byte) string {
	n := min(len(head), 8)
	var sb strings.Builder
	for i, c := range head[:n] {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%02x", c)
	}
	if len(head) > n {
		sb.WriteString(" …")
	}
	return "(" + sb.String() + ")"
}

// readAllBounded reads all of r, refusing more than max bytes: a zip or a
// Parquet file is read into memory whole (both need random access), so
// its size is the memory it costs.
func readAllBounded(name string, r io.Reader, max int64) ([]byte, error) {
	raw, err := io.ReadAll(&capReader{r: r, max: max, name: name})
	if err != nil {
		return nil, readError(name, err)
	}
	return raw, nil
}

// barChecker appends bars after the checks every format shares: times
// strictly increasing, prices finite and positive, high ≥ low, open and
// close inside [low, high], volume finite and not negative, at most
// MaxBars bars. Its errors are *ParseErrors naming the file, the line
// (or row) and the column.
type barChecker struct {
	name string
	max  int
	b    *Bars
}

func newBarChecker(name string, lim Limits) *barChecker {
	return &barChecker{name: name, max: lim.MaxBars, b: &Bars{Name: name}}
}

// bad is the *ParseError of line and column.
func (c *barChecker) bad(line int, col, format string, args ...any) error {
	return &ParseError{File: c.name, Line: line, Column: col, Reason: fmt.Sprintf(format, args...)}
}

// price checks one price of line: finite and positive.
func (c *barChecker) price(line int, col string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return c.bad(line, col, "value %v is not finite", v)
	}
	if v <= 0 {
		return c.bad(line, col, "price %v is not positive", v)
	}
	return nil
}

// ohlc checks the four prices of one bar (cols names their columns, in
// the order open, high, low, close).
func (c *barChecker) ohlc(line int, cols [4]string, o, h, l, cl float64) error {
	for k, v := range [4]float64{o, h, l, cl} {
		if err := c.price(line, cols[k], v); err != nil {
			return err
		}
	}
	if h < l {
		return c.bad(line, cols[1], "high %v is below low %v", h, l)
	}
	if o < l || o > h {
		return c.bad(line, cols[0], "open %v is outside [low %v, high %v]", o, l, h)
	}
	if cl < l || cl > h {
		return c.bad(line, cols[3], "close %v is outside [low %v, high %v]", cl, l, h)
	}
	return nil
}

// add checks and appends one bar (timeCol and cols name its columns for
// errors; volCol the volume's).
func (c *barChecker) add(line int, timeCol string, t time.Time, cols [4]string, o, h, l, cl float64, volCol string, vol float64) error {
	b := c.b
	if b.Len() == c.max {
		return c.bad(line, "", "more than the limit of %d bars (data limit bars; --data-limits raises it)", c.max)
	}
	if n := b.Len(); n > 0 && !t.After(b.Time[n-1]) {
		what := "before"
		if t.Equal(b.Time[n-1]) {
			what = "the same as"
		}
		return c.bad(line, timeCol, "time %s is %s the previous bar's %s: bars must be in strictly increasing time order",
			t.Format(time.RFC3339), what, b.Time[n-1].Format(time.RFC3339))
	}
	if err := c.ohlc(line, cols, o, h, l, cl); err != nil {
		return err
	}
	if math.IsNaN(vol) || math.IsInf(vol, 0) {
		return c.bad(line, volCol, "value %v is not finite", vol)
	}
	if vol < 0 {
		return c.bad(line, volCol, "volume %v is negative", vol)
	}
	b.add(t, o, h, l, cl, vol)
	return nil
}

// done returns the bars, or an error when there are none (what says
// where bars were looked for).
func (c *barChecker) done(what string) (*Bars, error) {
	if c.b.Len() == 0 {
		return nil, &ParseError{File: c.name, Reason: "no bars: " + what}
	}
	return c.b, nil
}

// ohlcNames are the usual names of the four price columns.
var ohlcNames = [4]string{"open", "high", "low", "close"}
