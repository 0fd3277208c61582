package prices

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// Column names ParseParquet looks for, compared case-insensitively. The
// time column is the first present of parquetTimeNames.
var (
	parquetTimeNames   = []string{"time", "timestamp", "date", "datetime"}
	parquetVolumeNames = []string{"volume", "vol"}
)

// ParseParquet parses bars from the Apache Parquet file raw (all its
// bytes; name labels it in errors), read with
// github.com/parquet-go/parquet-go.
//
// Columns are found by name among the top-level columns, case-insensitively
// and in any order; others are ignored:
//
//   - the time: time, timestamp, date or datetime (the first present), the
//     bar's start, stored in UTC. Its type may be a TIMESTAMP (any unit;
//     a timestamp not adjusted to UTC is taken as UTC), a DATE (days), a
//     string in any form ParseCSV accepts, or a plain integer counting
//     from the Unix epoch, its unit read from the first value's magnitude:
//     below 10¹¹ seconds, below 10¹⁴ milliseconds, below 10¹⁷
//     microseconds, else nanoseconds (each range starts in 1973 and ends
//     after 5000, so no date a price file holds is ambiguous);
//   - open, high, low and close: floating point, integers, or DECIMALs
//     stored as integers;
//   - volume (or vol), optional;
//   - bid and ask, optional and together: the quotes at each bar's open;
//     Spread is ask − bid and the prices are taken as given (they should be
//     the mids, as LEAN's forex bars are read).
//
// Bounded: a file with more rows than lim.MaxBars is refused before any
// value is read, and so is one whose columns read would decompress to
// more than lim.MaxBytes (as their chunks' metadata says). Every row is
// checked as ParseCSV checks a line (a null is refused too); the errors
// are *ParseErrors whose Line is the 1-based row.
func ParseParquet(ctx context.Context, name string, raw []byte, lim Limits) (b *Bars, err error) {
	lim = lim.withDefaults()
	defer func() {
		// The library reads a file it did not write: a malformed one
		// must fail as a bad file, not take the process down.
		if r := recover(); r != nil {
			b, err = nil, &ParseError{File: name, Reason: fmt.Sprintf("not a readable Parquet file: %v", r)}
		}
	}()
	if int64(len(raw)) > lim.MaxBytes {
		return nil, &ParseError{File: name, Reason: fmt.Sprintf("more than the limit of %d bytes (data limit bytes; --data-limits raises it)", lim.MaxBytes)}
	}
	f, err := parquet.OpenFile(bytes.NewReader(raw), int64(len(raw)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, &ParseError{File: name, Reason: fmt.Sprintf("not a readable Parquet file: %v", err)}
	}
	bad := func(format string, args ...any) error {
		return &ParseError{File: name, Reason: fmt.Sprintf(format, args...)}
	}
	n := f.NumRows()
	if n > int64(lim.MaxBars) {
		return nil, bad("%d rows, more than the limit of %d bars (data limit bars; --data-limits raises it)", n, lim.MaxBars)
	}
	if n == 0 {
		return nil, bad("no bars: the file has no rows")
	}
	cols, err := parquetColumns(name, f)
	if err != nil {
		return nil, err
	}
	var unpacked int64
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range cols.all() {
			if c.Index() < len(rg.Columns) {
				unpacked += rg.Columns[c.Index()].MetaData.TotalUncompressedSize
			}
		}
	}
	if unpacked > lim.MaxBytes {
		return nil, bad("its columns decompress to %d bytes, more than the limit of %d bytes (data limit bytes; --data-limits raises it)", unpacked, lim.MaxBytes)
	}

	times, err := readParquetTimes(ctx, name, f, cols.time, int(n))
	if err != nil {
		return nil, err
	}
	read := func(c *parquet.Column) ([]float64, error) {
		if c == nil {
			return nil, nil
		}
		return readParquetNumbers(ctx, name, f, c, int(n))
	}
	var px [4][]float64
	for k, c := range [4]*parquet.Column{cols.open, cols.high, cols.low, cols.close} {
		if px[k], err = read(c); err != nil {
			return nil, err
		}
	}
	vol, err := read(cols.volume)
	if err != nil {
		return nil, err
	}
	bid, err := read(cols.bid)
	if err != nil {
		return nil, err
	}
	ask, err := read(cols.ask)
	if err != nil {
		return nil, err
	}

	c := newBarChecker(name, lim)
	c.b.HasVolume = vol != nil
	names := [4]string{cols.open.Name(), cols.high.Name(), cols.low.Name(), cols.close.Name()}
	volName := ""
	if cols.volume != nil {
		volName = cols.volume.Name()
	}
	for i := range int(n) {
		v := 0.0
		if vol != nil {
			v = vol[i]
		}
		if err := c.add(i+1, cols.time.Name(), times[i], names, px[0][i], px[1][i], px[2][i], px[3][i], volName, v); err != nil {
			return nil, err
		}
		if bid != nil {
			if err := c.price(i+1, cols.bid.Name(), bid[i]); err != nil {
				return nil, err
			}
			if err := c.price(i+1, cols.ask.Name(), ask[i]); err != nil {
				return nil, err
			}
			if ask[i] < bid[i] {
				return nil, c.bad(i+1, cols.ask.Name(), "ask %v is below the bid %v", ask[i], bid[i])
			}
			c.b.Spread = append(c.b.Spread, ask[i]-bid[i])
		}
	}
	return c.done("the file has no rows")
}

// parquetCols are the columns ParseParquet reads; nil when absent.
type parquetCols struct {
	time, open, high, low, close, volume, bid, ask *parquet.Column
}

func (c *parquetCols) all() []*parquet.Column {
	var out []*parquet.Column
	for _, x := range []*parquet.Column{c.time, c.open, c.high, c.low, c.close, c.volume, c.bid, c.ask} {
		if x != nil {
			out = append(out, x)
		}
	}
	return out
}

// parquetColumns finds the columns of f by name (ParseParquet).
func parquetColumns(name string, f *parquet.File) (*parquetCols, error) {
	byName := map[string]*parquet.Column{}
	var known []string
	for _, c := range f.Root().Columns() {
		k := strings.ToLower(c.Name())
		if _, dup := byName[k]; !dup {
			byName[k] = c
		}
	}
	pick := func(names ...string) *parquet.Column {
		for _, n := range names {
			if c, ok := byName[n]; ok {
				known = append(known, c.Name())
				return c
			}
		}
		return nil
	}
	cols := &parquetCols{
		time: pick(parquetTimeNames...), open: pick("open"), high: pick("high"), low: pick("low"), close: pick("close"),
		volume: pick(parquetVolumeNames...), bid: pick("bid"), ask: pick("ask"),
	}
	var missing []string
	for _, m := range []struct {
		name string
		c    *parquet.Column
	}{{"time", cols.time}, {"open", cols.open}, {"high", cols.high}, {"low", cols.low}, {"close", cols.close}} {
		if m.c == nil {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return nil, &ParseError{File: name, Column: missing[0], Reason: fmt.Sprintf(
			"missing column %s (want time, timestamp, date or datetime; open, high, low, close; volume, bid and ask optional); the file has %d top-level columns, of which %s are known",
			strings.Join(missing, ", "), len(f.Root().Columns()), orNone(known))}
	}
	if (cols.bid == nil) != (cols.ask == nil) {
		return nil, &ParseError{File: name, Reason: "has a bid column without an ask column, or an ask without a bid: want both or neither"}
	}
	for _, c := range cols.all() {
		if !c.Leaf() || c.Repeated() {
			return nil, &ParseError{File: name, Column: c.Name(), Reason: "is a nested or repeated column: want one value a row"}
		}
	}
	return cols, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// eachParquetValue calls fn with the row index and value of every value
// of column c, row group after row group; it fails unless c holds exactly
// n values. It checks ctx at each page.
func eachParquetValue(ctx context.Context, name string, f *parquet.File, c *parquet.Column, n int, fn func(row int, v parquet.Value) error) error {
	row := 0
	buf := make([]parquet.Value, 1024)
	for _, rg := range f.RowGroups() {
		chunks := rg.ColumnChunks()
		if c.Index() >= len(chunks) {
			return &ParseError{File: name, Column: c.Name(), Reason: "a row group lacks the column"}
		}
		err := func() error {
			pages := chunks[c.Index()].Pages()
			defer pages.Close()
			for {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("read %s: stopped at row %d: %w", name, row, err)
				}
				p, err := pages.ReadPage()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return &ParseError{File: name, Column: c.Name(), Reason: fmt.Sprintf("cannot read a page: %v", err)}
				}
				vr := p.Values()
				for {
					k, err := vr.ReadValues(buf)
					for _, v := range buf[:k] {
						if row == n {
							parquet.Release(p)
							return &ParseError{File: name, Column: c.Name(), Reason: fmt.Sprintf("holds more values than the file's %d rows", n)}
						}
						if err := fn(row, v); err != nil {
							parquet.Release(p)
							return err
						}
						row++
					}
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						parquet.Release(p)
						return &ParseError{File: name, Column: c.Name(), Reason: fmt.Sprintf("cannot read values: %v", err)}
					}
				}
				parquet.Release(p)
			}
		}()
		if err != nil {
			return err
		}
	}
	if row != n {
		return &ParseError{File: name, Column: c.Name(), Reason: fmt.Sprintf("holds %d values for the file's %d rows", row, n)}
	}
	return nil
}

// readParquetNumbers reads a numeric column (ParseParquet).
func readParquetNumbers(ctx context.Context, name string, f *parquet.File, c *parquet.Column, n int) ([]float64, error) {
	kind := c.Type().Kind()
	scale := 1.0
	if lt := c.Type().LogicalType(); lt != nil {
		if d, ok := lt.Value.(*format.DecimalType); ok {
			scale = math.Pow10(int(d.Scale))
		}
	}
	switch kind {
	case parquet.Double, parquet.Float, parquet.Int32, parquet.Int64:
	default:
		return nil, &ParseError{File: name, Column: c.Name(), Reason: fmt.Sprintf("has type %s: want a floating point or integer column", c.Type())}
	}
	out := make([]float64, n)
	err := eachParquetValue(ctx, name, f, c, n, func(row int, v parquet.Value) error {
		if v.IsNull() {
			return &ParseError{File: name, Line: row + 1, Column: c.Name(), Reason: "is null"}
		}
		switch kind {
		case parquet.Double:
			out[row] = v.Double()
		case parquet.Float:
			out[row] = float64(v.Float())
		case parquet.Int32:
			out[row] = float64(v.Int32()) / scale
		default:
			out[row] = float64(v.Int64()) / scale
		}
		return nil
	})
	return out, err
}

// readParquetTimes reads the time column (ParseParquet says which types).
func readParquetTimes(ctx context.Context, name string, f *parquet.File, c *parquet.Column, n int) ([]time.Time, error) {
	typ := c.Type()
	kind := typ.Kind()
	var unit time.Duration // of an integer column; 0: not yet known
	date := false
	str := false
	if lt := typ.LogicalType(); lt != nil {
		switch v := lt.Value.(type) {
		case *format.TimestampType:
			if v.Unit.Value != nil {
				unit = v.Unit.Value.Duration()
			}
		case *format.DateType:
			date = true
		case *format.StringType:
			str = true
		}
	}
	if ct := typ.ConvertedType(); ct != nil && unit == 0 {
		switch *ct {
		case deprecated.TimestampMillis:
			unit = time.Millisecond
		case deprecated.TimestampMicros:
			unit = time.Microsecond
		case deprecated.Date:
			date = true
		}
	}
	switch {
	case kind == parquet.ByteArray:
		str = true
	case kind == parquet.Int32 || kind == parquet.Int64:
	default:
		return nil, &ParseError{File: name, Column: c.Name(), Reason: fmt.Sprintf(
			"time column of type %s: want a TIMESTAMP, a DATE, an integer epoch (s, ms, µs or ns) or a string", typ)}
	}
	out := make([]time.Time, n)
	err := eachParquetValue(ctx, name, f, c, n, func(row int, v parquet.Value) error {
		bad := func(format string, args ...any) error {
			return &ParseError{File: name, Line: row + 1, Column: c.Name(), Reason: fmt.Sprintf(format, args...)}
		}
		if v.IsNull() {
			return bad("is null")
		}
		if str {
			s := strings.TrimSpace(string(v.ByteArray()))
			t, ok := parseDate(s)
			if !ok {
				return bad("cannot parse time %s: want YYYY-MM-DD[ HH:MM[:SS]][±HH:MM] or RFC 3339", excerpt(s))
			}
			out[row] = t
			return nil
		}
		x := v.Int64()
		if kind == parquet.Int32 {
			x = int64(v.Int32())
		}
		if date {
			out[row] = time.Unix(x*86400, 0).UTC()
			return nil
		}
		if unit == 0 {
			unit = epochUnit(x)
		}
		switch unit {
		case time.Second:
			out[row] = time.Unix(x, 0).UTC()
		case time.Millisecond:
			out[row] = time.UnixMilli(x).UTC()
		case time.Microsecond:
			out[row] = time.UnixMicro(x).UTC()
		default:
			out[row] = time.Unix(0, x).UTC()
		}
		return nil
	})
	return out, err
}

// epochUnit is the unit of an integer epoch time x, from its magnitude
// (ParseParquet).
func epochUnit(x int64) time.Duration {
	a := math.Abs(float64(x))
	switch {
	case a < 1e11:
		return time.Second
	case a < 1e14:
		return time.Millisecond
	case a < 1e17:
		return time.Microsecond
	default:
		return time.Nanosecond
	}
}
