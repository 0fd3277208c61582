package walkforward

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Period is a calendar length: whole years, months and days, added with
// time.AddDate, so that "1y" from 2019-01-01 ends on 2020-01-01 whatever
// the leap days. The zero Period is no time at all.
type Period struct {
	Years, Months, Days int
}

// ParsePeriod reads a period: a whole number followed by a unit, "y"
// (years), "mo" (months), "w" (weeks, 7 days) or "d" (days): "1y",
// "6mo", "2w", "90d"; "0" is the zero Period. The error names the text
// and what is wanted.
func ParsePeriod(s string) (Period, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	if t == "0" {
		return Period{}, nil
	}
	for _, u := range []struct {
		suffix string
		make   func(n int) Period
	}{
		{"mo", func(n int) Period { return Period{Months: n} }},
		{"y", func(n int) Period { return Period{Years: n} }},
		{"w", func(n int) Period { return Period{Days: 7 * n} }},
		{"d", func(n int) Period { return Period{Days: n} }},
	} {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 {
			break
		}
		return u.make(n), nil
	}
	return Period{}, fmt.Errorf("period %q: want a positive whole number and a unit, y, mo, w or d (\"1y\", \"6mo\", \"2w\", \"90d\"), or 0", s)
}

// String writes p as ParsePeriod reads it when p has one unit ("1y",
// "6mo", "14d"), else as "1y2mo3d".
func (p Period) String() string {
	if p == (Period{}) {
		return "0"
	}
	var b strings.Builder
	for _, u := range []struct {
		n    int
		unit string
	}{{p.Years, "y"}, {p.Months, "mo"}, {p.Days, "d"}} {
		if u.n != 0 {
			b.WriteString(strconv.Itoa(u.n) + u.unit)
		}
	}
	return b.String()
}

// MarshalText writes p as String does, so JSON shows "1y".
func (p Period) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads what String writes for a one-unit period.
func (p *Period) UnmarshalText(b []byte) error {
	q, err := ParsePeriod(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Add is t moved k periods on (back for negative k).
func (p Period) Add(t time.Time, k int) time.Time {
	return t.AddDate(k*p.Years, k*p.Months, k*p.Days)
}

// InYears is p's length in years, a month a twelfth and a day 1/365.25:
// what converts it into an expected number of bars.
func (p Period) InYears() float64 {
	return float64(p.Years) + float64(p.Months)/12 + float64(p.Days)/365.25
}

// anchor is the calendar boundary at or before t that periods of p start
// from: 1 January of t's year for a period in whole years, the first of
// t's month for one in months, midnight of t's day otherwise (UTC).
func (p Period) anchor(t time.Time) time.Time {
	t = t.UTC()
	switch {
	case p.Days == 0 && p.Months == 0:
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	case p.Days == 0:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
