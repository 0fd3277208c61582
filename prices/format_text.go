package prices

import (
	"bytes"
	"context"
	"io"
	"math"
	"strconv"
	"strings"
)

// headerless reports whether the first line of head that is not blank
// is a data row of a headerless file (ParseHeaderless): a time, then four
// or five numbers, separated by commas or by tabs. A header line ("Time,
// Open, ...") is not.
func headerless(head []byte) bool {
	head = bytes.TrimPrefix(head, utf8BOM)
	for len(head) > 0 {
		line, rest, _ := bytes.Cut(head, []byte("\n"))
		head = rest
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		sep := separator(line)
		f := strings.Split(string(line), string(sep))
		if len(f) != 5 && len(f) != 6 {
			return false
		}
		if _, ok := parseDate(strings.TrimSpace(f[0])); !ok {
			return false
		}
		for _, v := range f[1:] {
			if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				return false
			}
		}
		return true
	}
	return false
}

// ParseHeaderless parses bars from a text file without a header line, as
// h4-forex/AUDCHF_H4.csv of the corpus is: each line
// "time,open,high,low,close[,volume]", separated by commas (or by tabs
// when the first row holds one), the time in any form ParseCSV accepts
// (that file's is "2007-08-30 00:00", UTC). Every line must have the
// first row's number of fields (5 or 6). Rows are checked as ParseCSV
// checks them, within lim, and errors are *ParseErrors naming the line
// and the column (time, open, high, low, close or volume, as if a header
// had named them). It checks ctx every 4,096 lines.
func ParseHeaderless(ctx context.Context, name string, r io.Reader, lim Limits) (*Bars, error) {
	lim = lim.withDefaults()
	lr, err := newLineReader(name, r, lim)
	if err != nil {
		return nil, err
	}
	c := newBarChecker(name, lim)
	n := 0 // fields of the first row
	for fields, err := range lr.rows(ctx) {
		if err != nil {
			return nil, err
		}
		if n == 0 {
			n = len(fields)
			c.b.HasVolume = n == 6
		}
		if len(fields) != n {
			return nil, c.bad(lr.line, "", "has %d fields, the file's first row has %d (time, open, high, low, close[, volume]; no header)", len(fields), n)
		}
		if err := headerlessRow(c, lr.line, fields); err != nil {
			return nil, err
		}
	}
	return c.done("the file holds no line that is not blank")
}

// headerlessRow checks and appends one row of a headerless file.
func headerlessRow(c *barChecker, line int, f []string) error {
	ts := strings.TrimSpace(f[0])
	t, ok := parseDate(ts)
	if !ok {
		return c.bad(line, "time", "cannot parse time %s: want YYYY-MM-DD[ HH:MM[:SS]][±HH:MM] or RFC 3339 (a headerless file)", excerpt(ts))
	}
	var v [5]float64
	cols := [5]string{"open", "high", "low", "close", "volume"}
	for k := 1; k < len(f); k++ {
		s := strings.TrimSpace(f[k])
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return c.bad(line, cols[k-1], "cannot parse %s as a number", excerpt(s))
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return c.bad(line, cols[k-1], "value %s is not finite", excerpt(s))
		}
		v[k-1] = x
	}
	return c.add(line, "time", t, ohlcNames, v[0], v[1], v[2], v[3], "volume", v[4])
}
