package prices

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FactorFile is a LEAN factor file (factor_files/TICKER.csv): the
// factors that adjust an equity's raw prices for its splits and
// dividends, as QuantConnect/Lean's CorporateFactorProvider reads and
// applies them (Common/Data/Auxiliary/CorporateFactorRow.cs and
// CorporateFactorProvider.cs).
//
// Each row is "YYYYMMDD,price_factor,split_factor[,reference_price]". A
// row's factors apply to the bars on its date and before it, back to the
// previous row's date (exclusive): the row dated 20140606 in AAPL's file
// (split factor 1/28) covers the trading days up to 2014-06-06, the last
// before the 7:1 split of 2014-06-09, and the row dated 20140806 (1/4)
// the days from 2014-06-09 on. So the factors of a bar are those of the
// first row dated on or after the bar's date (At); a bar after the last
// row gets 1 and 1. The adjusted price is the raw price × price_factor
// × split_factor (LEAN's PriceScaleFactor); the adjusted volume is the
// raw volume ÷ split_factor.
type FactorFile struct {
	Name string
	// Rows are in increasing date order, one a date.
	Rows []FactorRow
}

// FactorRow is one row of a FactorFile.
type FactorRow struct {
	// Date is the row's date as YYYYMMDD.
	Date                     int
	PriceFactor, SplitFactor float64
	ReferencePrice           float64
}

// ParseFactorFile reads a LEAN factor file from r, within lim. As LEAN
// does, it skips lines holding "inf" or "e+" (factors written in
// exponential notation lost their precision) and rows whose price_factor
// × split_factor is not positive, sorts the rows by date and keeps the
// first of a date. A line that does not parse is a *ParseError naming the
// line.
func ParseFactorFile(ctx context.Context, name string, r io.Reader, lim Limits) (*FactorFile, error) {
	lim = lim.withDefaults()
	lr, err := newLineReader(name, r, lim)
	if err != nil {
		return nil, err
	}
	ff := &FactorFile{Name: name}
	var fields []string
	for {
		line, err := lr.nextText(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if bytes.Contains(line, []byte("inf")) || bytes.Contains(line, []byte("e+")) {
			continue
		}
		bad := func(col, format string, args ...any) error {
			return &ParseError{File: name, Line: lr.line, Column: col, Reason: fmt.Sprintf(format, args...)}
		}
		var why string
		if fields, why = splitFields(string(line), ',', lim.MaxFields, fields); why != "" {
			return nil, bad("", "%s", why)
		}
		if len(fields) < 3 || len(fields) > 4 {
			return nil, bad("", "has %d fields, want 3 or 4 (date, price_factor, split_factor[, reference_price])", len(fields))
		}
		ds := strings.TrimSpace(fields[0])
		d, err := time.Parse("20060102", ds)
		if err != nil {
			return nil, bad("date", "cannot parse date %s: want YYYYMMDD", excerpt(ds))
		}
		var v [3]float64
		names := [3]string{"price_factor", "split_factor", "reference_price"}
		for k := 1; k < len(fields); k++ {
			s := strings.TrimSpace(fields[k])
			x, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, bad(names[k-1], "cannot parse %s as a finite number", excerpt(s))
			}
			v[k-1] = x
		}
		if !(v[0]*v[1] > 0) {
			continue // LEAN ignores rows without a positive scale
		}
		if len(ff.Rows) == lim.MaxBars {
			return nil, bad("", "more than the limit of %d rows (data limit bars; --data-limits raises it)", lim.MaxBars)
		}
		ff.Rows = append(ff.Rows, FactorRow{Date: dateKey(d), PriceFactor: v[0], SplitFactor: v[1], ReferencePrice: v[2]})
	}
	slices.SortStableFunc(ff.Rows, func(a, b FactorRow) int { return a.Date - b.Date })
	ff.Rows = slices.CompactFunc(ff.Rows, func(a, b FactorRow) bool { return a.Date == b.Date })
	if len(ff.Rows) == 0 {
		return nil, &ParseError{File: name, Reason: "no factor rows (want lines YYYYMMDD,price_factor,split_factor[,reference_price])"}
	}
	return ff, nil
}

// At returns the factors of a bar on date (YYYYMMDD, the bar's date in
// the exchange's time zone): those of the first row dated on or after
// date, or 1 and 1 after the last row (FactorFile says why).
func (ff *FactorFile) At(date int) FactorRow {
	i, _ := slices.BinarySearchFunc(ff.Rows, date, func(r FactorRow, d int) int { return r.Date - d })
	if i == len(ff.Rows) {
		return FactorRow{Date: date, PriceFactor: 1, SplitFactor: 1}
	}
	return ff.Rows[i]
}

// factorCursor is At for dates that never decrease, without a search per
// bar: the row last found stays good until the date passes it.
type factorCursor struct {
	ok   bool
	from int // the row holds for dates in (from, row.Date]
	row  FactorRow
}

func (c *factorCursor) at(ff *FactorFile, date int) FactorRow {
	if c.ok && date > c.from && date <= c.row.Date {
		return c.row
	}
	c.row = ff.At(date)
	i, _ := slices.BinarySearchFunc(ff.Rows, date, func(r FactorRow, d int) int { return r.Date - d })
	c.from = 0
	if i > 0 {
		c.from = ff.Rows[i-1].Date
	}
	c.ok = i < len(ff.Rows)
	return c.row
}
