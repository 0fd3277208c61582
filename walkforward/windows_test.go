package walkforward

import (
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/market"
)

// daily is one bar a day at noon UTC from from to to, both included.
func daily(from, to string) []time.Time {
	f, _ := time.Parse(time.DateOnly, from)
	t, _ := time.Parse(time.DateOnly, to)
	var out []time.Time
	for d := f; !d.After(t); d = d.AddDate(0, 0, 1) {
		out = append(out, d.Add(12*time.Hour))
	}
	return out
}

func date(s string) time.Time {
	t, _ := time.Parse(time.DateOnly, s)
	return t
}

// TestWindowsByHand: two daily series, A from 2010-01-01 to 2013-06-30
// and B from 2011-07-01 to 2013-12-31, yearly test blocks after half a
// year of validation, at least three months of training and a quarter of
// each block's bars. Worked by hand:
//
//   - T = 2010-01-01: A has no validation bars (it starts on T), B no test
//     bars: no window.
//   - T = 2011-01-01 (window 0): A trains on 2010-01-01 … 06-30 (181
//     bars, ≥ ⌈365·0.25⌉ = 92), validates on 07-01 … 12-31 (184 bars,
//     ≥ ⌈0.25·365·0.5⌉ = 46) and tests on 2011 (365 bars); B's 184 test
//     bars (2011-07-01 on) would do, but it has no validation bars.
//   - T = 2012-01-01 (window 1): A trains on 546 bars, validates on 184,
//     tests on 366 (2012 is a leap year); B has no training bar before
//     its validation block starts on 2011-07-01, the day it starts.
//   - T = 2013-01-01 (window 2): A tests on its last 181 bars (≥ 92), B
//     trains on 2011-07-01 … 2012-06-30 (366 bars), validates on 184 and
//     tests on 365.
//   - T = 2014-01-01 is after every series' last bar: the end.
func TestWindowsByHand(t *testing.T) {
	series := []SeriesTimes{
		{Name: "A", Time: daily("2010-01-01", "2013-06-30"), BarsPerYear: 365},
		{Name: "B", Time: daily("2011-07-01", "2013-12-31"), BarsPerYear: 365},
	}
	l := Layout{Step: Period{Years: 1}, Test: Period{Years: 1}, Valid: Period{Months: 6}, MinTrain: Period{Months: 3}, MinTrainBars: 10, MinShare: 0.25}
	ws, sws, err := Windows(series, l)
	if err != nil {
		t.Fatal(err)
	}
	want := []Window{
		{Index: 0, TrainFrom: date("2010-01-01").Add(12 * time.Hour), ValidFrom: date("2010-07-01"), TestFrom: date("2011-01-01"), TestTo: date("2012-01-01")},
		{Index: 1, TrainFrom: date("2010-01-01").Add(12 * time.Hour), ValidFrom: date("2011-07-01"), TestFrom: date("2012-01-01"), TestTo: date("2013-01-01")},
		{Index: 2, TrainFrom: date("2010-01-01").Add(12 * time.Hour), ValidFrom: date("2012-07-01"), TestFrom: date("2013-01-01"), TestTo: date("2014-01-01")},
	}
	if len(ws) != len(want) {
		t.Fatalf("%d windows %+v, want %d", len(ws), ws, len(want))
	}
	for i := range want {
		if ws[i] != want[i] {
			t.Errorf("window %d: %+v, want %+v", i, ws[i], want[i])
		}
	}
	r := func(f, t int) market.Range { return market.Range{From: f, To: t} }
	type placed struct {
		train, valid, test market.Range
		skip               string // a part of the reason; "" takes part
	}
	wantS := []placed{
		{r(0, 181), r(181, 365), r(365, 730), ""},         // 0 A
		{r(0, 0), r(0, 0), r(0, 184), "validation block"}, // 0 B
		{r(0, 546), r(546, 730), r(730, 1096), ""},        // 1 A
		{r(0, 0), r(0, 184), r(184, 550), "training"},     // 1 B
		{r(0, 912), r(912, 1096), r(1096, 1277), ""},      // 2 A
		{r(0, 366), r(366, 550), r(550, 915), ""},         // 2 B
	}
	if len(sws) != len(wantS) {
		t.Fatalf("%d series windows, want %d", len(sws), len(wantS))
	}
	for i, w := range wantS {
		g := sws[i]
		if g.Window != i/2 || g.Series != series[i%2].Name || g.Train != w.train || g.Valid != w.valid || g.Test != w.test {
			t.Errorf("window %d series %s: %+v, want train %v valid %v test %v", i/2, series[i%2].Name, g, w.train, w.valid, w.test)
		}
		if (w.skip == "") != (g.Skip == "") || !strings.Contains(g.Skip, w.skip) {
			t.Errorf("window %d series %s: skip %q, want one naming %q", i/2, g.Series, g.Skip, w.skip)
		}
	}
	if !strings.Contains(sws[1].Skip, "holds 0 bars, fewer than the 46") {
		t.Errorf("B's skip in window 0 is %q: want the count and the need", sws[1].Skip)
	}
	// The test block of A in window 2 starts with the first bar of 2013.
	if got := series[0].Time[sws[4].Test.From]; !got.Equal(date("2013-01-01").Add(12 * time.Hour)) {
		t.Errorf("A's test in window 2 starts %s", got)
	}
}

// TestWindowsSkipAShortLastBlock: a test block whose series ends a month
// into it has fewer than a quarter of its bars: the window is left out,
// while half a year of bars is kept.
func TestWindowsSkipAShortLastBlock(t *testing.T) {
	l := Layout{MinTrainBars: 10, MinTrain: Period{Months: 3}}
	for _, c := range []struct {
		end  string
		want int
	}{{"2013-01-31", 2}, {"2013-06-30", 3}} {
		ws, _, err := Windows([]SeriesTimes{{Name: "A", Time: daily("2010-01-01", c.end), BarsPerYear: 365}}, l)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != c.want || ws[len(ws)-1].TestFrom.Year() != 2010+c.want {
			t.Errorf("end %s: %d windows %+v, want %d, the last testing %d", c.end, len(ws), ws, c.want, 2010+c.want)
		}
	}
}

// TestWindowsStepShorterThanTest: a step of six months with yearly test
// blocks starts a window every half year, test blocks overlapping; the
// first is the first with a training bar before its validation block.
func TestWindowsStepShorterThanTest(t *testing.T) {
	l := Layout{Step: Period{Months: 6}, Test: Period{Years: 1}, Valid: Period{Months: 6}, MinTrainBars: 10}
	ws, _, err := Windows([]SeriesTimes{{Name: "A", Time: daily("2010-01-01", "2012-12-31"), BarsPerYear: 365}}, l)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range ws {
		got = append(got, w.TestFrom.Format(time.DateOnly)+".."+w.TestTo.Format(time.DateOnly))
	}
	want := "2011-01-01..2012-01-01 2011-07-01..2012-07-01 2012-01-01..2013-01-01 2012-07-01..2013-07-01"
	if strings.Join(got, " ") != want {
		t.Errorf("test blocks %v, want %s", got, want)
	}
}

func TestWindowsErrorsNameTheInput(t *testing.T) {
	for _, c := range []struct {
		series []SeriesTimes
		l      Layout
		want   string
	}{
		{nil, Layout{}, "no series"},
		{[]SeriesTimes{{Name: "A", Time: daily("2010-01-01", "2010-01-05"), First: 5}}, Layout{}, `"A" has 5 bars, none usable from bar 5`},
		{[]SeriesTimes{{Name: "A", Time: daily("2010-01-01", "2010-03-01")}}, Layout{}, "no window from 2010-01-01 to 2010-03-01"},
		{[]SeriesTimes{{Name: "A", Time: daily("2010-01-01", "2012-03-01")}}, Layout{MinShare: 2}, "min_share 2"},
		{[]SeriesTimes{{Name: "A", Time: daily("2010-01-01", "2012-03-01")}}, Layout{Step: Period{Months: -1}}, "step -1mo"},
	} {
		_, _, err := Windows(c.series, c.l)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Windows(%d series, %+v): %v, want an error naming %q", len(c.series), c.l, err, c.want)
		}
	}
}

func TestParsePeriod(t *testing.T) {
	for s, want := range map[string]Period{"1y": {Years: 1}, "6mo": {Months: 6}, "2w": {Days: 14}, "90d": {Days: 90}, "0": {}, " 3Y ": {Years: 3}} {
		got, err := ParsePeriod(s)
		if err != nil || got != want {
			t.Errorf("ParsePeriod(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "y", "1", "-1y", "1.5y", "1m", "0mo"} {
		if _, err := ParsePeriod(s); err == nil || !strings.Contains(err.Error(), "want a positive whole number") {
			t.Errorf("ParsePeriod(%q): %v, want an error", s, err)
		}
	}
	if got := (Period{Years: 1, Months: 2, Days: 3}).String(); got != "1y2mo3d" {
		t.Errorf("String = %q", got)
	}
}
