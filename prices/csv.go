package prices

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dqnflow/dqnflow/config"
)

// ParseError is a rejected price file: the file, the 1-based line (0 when
// the error concerns the whole file), the column when one is to blame, and
// the reason.
type ParseError struct {
	File   string
	Line   int
	Column string
	Reason string
}

func (e *ParseError) Error() string {
	var sb strings.Builder
	sb.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&sb, ":%d", e.Line)
	}
	if e.Column != "" {
		fmt.Fprintf(&sb, ": column %q", e.Column)
	}
	sb.WriteString(": ")
	sb.WriteString(e.Reason)
	return sb.String()
}

// Header names (compared case-insensitively, surrounding spaces ignored).
var (
	timeColumnNames   = []string{"time", "date", "datetime", "timestamp"}
	unixColumnName    = "unix"
	volumeColumnNames = []string{"volume", "vol"}
)

// ParseCSV parses OHLC(V) bars from r within lim (zero fields take the
// defaults); name labels the source in errors and becomes Bars.Name. It
// reads r line by line, holding one line at a time, checks ctx every 4,096
// lines and stops with ctx's error when it is done.
//
// Format: the first line that is not blank is a header; fields are
// separated by tabs when the header holds a tab, by commas otherwise, and
// may be quoted within their line. Columns are found by name,
// case-insensitively and in any order: a time column (time, date, datetime
// or timestamp; when several exist the first whose values are date strings
// is taken, and a "unix" epoch-seconds column serves when none is), open,
// high, low, close, and optionally volume (or vol). Other columns are
// ignored. Times are "2006-01-02 15:04:05" with an optional zone offset,
// RFC 3339, "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02" or
// epoch seconds; times without a zone are UTC, and all are stored in UTC.
// A UTF-8 byte-order mark, CRLF line endings and blank lines are tolerated;
// UTF-16 and UTF-32 text, and NUL bytes, are refused with what to do.
//
// Every row is checked, and the first bad one is a *ParseError naming the
// line: wrong field count, a number that does not parse or is not finite,
// a price ≤ 0, high < low, open or close outside [low, high], a negative
// volume, an unparsable time, or a time not after the previous bar's. So is
// the first limit passed (file size, line length, fields, bars). An error
// never quotes the file beyond a short excerpt of a value on a row under a
// header that named every column (excerpt): a file that is not a price
// file is never echoed.
func ParseCSV(ctx context.Context, name string, r io.Reader, lim Limits) (*Bars, error) {
	lim = lim.withDefaults()
	lr, err := newLineReader(name, r, lim)
	if err != nil {
		return nil, err
	}
	var (
		p      *rowParser
		b      = &Bars{Name: name}
		header int // the header's line
	)
	for fields, err := range lr.rows(ctx) {
		if err != nil {
			return nil, err
		}
		if p == nil {
			header = lr.line
			cols, err := findColumns(name, header, fields)
			if err != nil {
				return nil, err
			}
			p, b.HasVolume = &rowParser{name: name, cols: cols}, cols.volume >= 0
			continue
		}
		if b.Len() == lim.MaxBars {
			return nil, &ParseError{File: name, Line: lr.line, Reason: fmt.Sprintf(
				"more than the limit of %d bars (data limit bars; --data-limits raises it)", lim.MaxBars)}
		}
		if err := p.parse(b, lr.line, fields); err != nil {
			return nil, err
		}
	}
	if p == nil {
		return nil, &ParseError{File: name, Reason: "empty file: want a header line and at least one bar"}
	}
	if b.Len() == 0 {
		return nil, &ParseError{File: name, Line: header, Reason: "no bars after the header line"}
	}
	return b, nil
}

// columns holds field indexes; -1 means absent.
type columns struct {
	n                      int   // fields in the header
	time                   []int // candidate time columns, in order of preference
	open, high, low, close int
	volume                 int
	names                  []string
	timeCol                int  // chosen at the first data row
	unixTime               bool // timeCol holds epoch seconds
}

// findColumns maps header names to field indexes (line is the header's
// line, for errors). A repeated price column is ambiguous and rejected; for
// any other repeated name the first wins.
func findColumns(name string, line int, rec []string) (*columns, error) {
	c := &columns{n: len(rec), open: -1, high: -1, low: -1, close: -1, volume: -1, timeCol: -1}
	c.names = make([]string, len(rec))
	seen := map[string]int{}
	for i, f := range rec {
		h := strings.ToLower(strings.TrimSpace(f))
		c.names[i] = strings.TrimSpace(f)
		if j, dup := seen[h]; dup && h != "" {
			for _, want := range []string{"open", "high", "low", "close"} {
				if h == want {
					return nil, &ParseError{File: name, Line: line, Column: c.names[i],
						Reason: fmt.Sprintf("column appears twice in the header (fields %d and %d)", j+1, i+1)}
				}
			}
			continue
		}
		seen[h] = i
	}
	for _, t := range timeColumnNames {
		if i, ok := seen[t]; ok {
			c.time = append(c.time, i)
		}
	}
	if i, ok := seen[unixColumnName]; ok {
		c.time = append(c.time, i)
	}
	c.open, c.high, c.low, c.close = idx(seen, "open"), idx(seen, "high"), idx(seen, "low"), idx(seen, "close")
	for _, v := range volumeColumnNames {
		if i, ok := seen[v]; ok {
			c.volume = i
			break
		}
	}
	var missing []string
	if len(c.time) == 0 {
		missing = append(missing, "time")
	}
	for _, m := range []struct {
		name string
		i    int
	}{{"open", c.open}, {"high", c.high}, {"low", c.low}, {"close", c.close}} {
		if m.i < 0 {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return nil, &ParseError{File: name, Line: line, Column: missing[0],
			Reason: fmt.Sprintf("missing column %s (want time, date, datetime, timestamp or unix; open, high, low, close; volume optional); %s",
				strings.Join(missing, ", "), c.known())}
	}
	return c, nil
}

// known says which of the header's fields are column names ParseCSV
// knows: only those are named, so that the first line of a file that is
// not a price file (a password file, say) is never repeated.
func (c *columns) known() string {
	var names []string
	for _, n := range c.names {
		h := strings.ToLower(n)
		if slices.Contains(timeColumnNames, h) || slices.Contains(volumeColumnNames, h) || h == unixColumnName ||
			h == "open" || h == "high" || h == "low" || h == "close" {
			names = append(names, n)
		}
	}
	fields := fmt.Sprintf("%d fields", c.n)
	if c.n == 1 {
		fields = "one field"
	}
	if len(names) == 0 {
		return fmt.Sprintf("the header has %s, none of them a known column (not shown)", fields)
	}
	return fmt.Sprintf("the header has %s, of which %s are known (the others are not shown)", fields, strings.Join(names, ", "))
}

func idx(seen map[string]int, k string) int {
	if i, ok := seen[k]; ok {
		return i
	}
	return -1
}

// rowParser checks and appends data rows.
type rowParser struct {
	name string
	cols *columns
}

// parseDate parses a date string with the layouts of config.ParseTime
// (zone-less times are UTC), so a CSV and a config accept the same forms.
func parseDate(s string) (time.Time, bool) {
	t, err := config.ParseTime(s)
	return t, err == nil
}

// parseUnix parses epoch seconds (an optional fraction is kept to the ns).
func parseUnix(s string) (time.Time, bool) {
	if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(sec, 0).UTC(), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e11 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}

// chooseTime picks the time column at the first data row: the first
// candidate holding a date string, else the first holding epoch seconds,
// else the first candidate (whose value then fails with a clear reason).
func (p *rowParser) chooseTime(rec []string) {
	c := p.cols
	for _, i := range c.time {
		if _, ok := parseDate(strings.TrimSpace(rec[i])); ok {
			c.timeCol = i
			return
		}
	}
	for _, i := range c.time {
		if _, ok := parseUnix(strings.TrimSpace(rec[i])); ok {
			c.timeCol, c.unixTime = i, true
			return
		}
	}
	c.timeCol = c.time[0]
}

func (p *rowParser) parse(b *Bars, line int, rec []string) error {
	c := p.cols
	bad := func(col, format string, args ...any) error {
		return &ParseError{File: p.name, Line: line, Column: col, Reason: fmt.Sprintf(format, args...)}
	}
	if len(rec) != c.n {
		return bad("", "has %d fields, the header has %d", len(rec), c.n)
	}
	if c.timeCol < 0 {
		p.chooseTime(rec)
	}
	ts := strings.TrimSpace(rec[c.timeCol])
	var t time.Time
	var ok bool
	if c.unixTime {
		t, ok = parseUnix(ts)
	} else {
		t, ok = parseDate(ts)
	}
	if !ok {
		return bad(c.names[c.timeCol], "cannot parse time %s: want YYYY-MM-DD[ HH:MM[:SS]][±HH:MM], RFC 3339 or epoch seconds", excerpt(ts))
	}
	if n := b.Len(); n > 0 && !t.After(b.Time[n-1]) {
		return bad(c.names[c.timeCol], "time %s is not after the previous bar's %s: bars must be in strictly increasing time order",
			t.Format(time.RFC3339), b.Time[n-1].Format(time.RFC3339))
	}
	num := func(i int) (float64, error) {
		s := strings.TrimSpace(rec[i])
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, bad(c.names[i], "cannot parse %s as a number", excerpt(s))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, bad(c.names[i], "value %s is not finite", excerpt(s))
		}
		return v, nil
	}
	var px [4]float64 // open, high, low, close
	for k, i := range []int{c.open, c.high, c.low, c.close} {
		v, err := num(i)
		if err != nil {
			return err
		}
		if v <= 0 {
			return bad(c.names[i], "price %v is not positive", v)
		}
		px[k] = v
	}
	o, h, l, cl := px[0], px[1], px[2], px[3]
	if h < l {
		return bad(c.names[c.high], "high %v is below low %v", h, l)
	}
	if o < l || o > h {
		return bad(c.names[c.open], "open %v is outside [low %v, high %v]", o, l, h)
	}
	if cl < l || cl > h {
		return bad(c.names[c.close], "close %v is outside [low %v, high %v]", cl, l, h)
	}
	vol := 0.0
	if c.volume >= 0 {
		v, err := num(c.volume)
		if err != nil {
			return err
		}
		if v < 0 {
			return bad(c.names[c.volume], "volume %v is negative", v)
		}
		vol = v
	}
	b.add(t, o, h, l, cl, vol)
	return nil
}

// BarsPerYear is the data's own bar density, (N−1) / (years from the first
// bar to the last, a year being 365.25 days): about 8,766 for gapless hourly
// bars, fewer when the market closes at night or at weekends. It is 0 for
// fewer than two bars.
func (b *Bars) BarsPerYear() float64 {
	n := b.Len()
	if n < 2 {
		return 0
	}
	years := b.Time[n-1].Sub(b.Time[0]).Hours() / (365.25 * 24)
	if years <= 0 {
		return 0
	}
	return float64(n-1) / years
}
