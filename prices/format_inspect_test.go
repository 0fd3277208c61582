package prices

import (
	"math"
	"testing"
	"time"
)

// barsAt are bars at times ts whose closes follow the log returns r
// (len(ts)-1 of them) from 100; opens equal closes, high and low 1 % off.
func barsAt(ts []time.Time, r []float64) *Bars {
	b := &Bars{Name: "x"}
	c := 100.0
	for i, t := range ts {
		if i > 0 {
			c *= math.Exp(r[i-1])
		}
		b.Time = append(b.Time, t)
		b.Open = append(b.Open, c)
		b.High = append(b.High, c*1.01)
		b.Low = append(b.Low, c*0.99)
		b.Close = append(b.Close, c)
		b.Volume = append(b.Volume, 0)
	}
	return b
}

// alternating is n returns of ±s.
func alternating(n int, s float64) []float64 {
	r := make([]float64, n)
	for i := range r {
		r[i] = s
		if i%2 == 1 {
			r[i] = -s
		}
	}
	return r
}

// TestInspectGapsAreBeyondTheUsualSpacing: around the clock, a spacing of
// 3 bars is no gap and one of 4 is (spacing > 3 × bar size); for a market
// closed at weekends the weekend is usual and no gap, but a weekday closed
// for a holiday is one, and the longest gap is named with its ends.
func TestInspectGapsAreBeyondTheUsualSpacing(t *testing.T) {
	start := utc("2024-01-01 00:00:00") // a Monday
	var ts []time.Time
	for h := range 24 * 56 {
		switch h {
		case 100, 101: // 3h spacing: no gap
			continue
		case 200, 201, 202: // 4h spacing: a gap
			continue
		}
		ts = append(ts, start.Add(time.Duration(h)*time.Hour))
	}
	in := Inspect(barsAt(ts, make([]float64, len(ts)-1)), 10)
	if in.BarSize != Duration(time.Hour) || in.Gaps != 1 || in.Longest == nil ||
		!in.Longest.From.Equal(start.Add(199*time.Hour)) || time.Duration(in.Longest.Length) != 4*time.Hour {
		t.Errorf("around the clock: bar size %v, %d gaps, longest %+v; want 1h, 1 gap of 4h after hour 199", in.BarSize, in.Gaps, in.Longest)
	}

	ts = ts[:0]
	holiday := utc("2024-01-17 00:00:00") // the third Wednesday
	for h := range 24 * 7 * 8 {
		tt := start.Add(time.Duration(h) * time.Hour)
		if wd := tt.Weekday(); wd == time.Saturday || wd == time.Sunday {
			continue
		}
		if !tt.Before(holiday) && tt.Before(holiday.Add(24*time.Hour)) {
			continue
		}
		ts = append(ts, tt)
	}
	in = Inspect(barsAt(ts, make([]float64, len(ts)-1)), 10)
	if in.Gaps != 1 || in.Longest == nil || !in.Longest.From.Equal(holiday.Add(-time.Hour)) ||
		time.Duration(in.Longest.Length) != 25*time.Hour || time.Duration(in.Longest.Usual) != time.Hour {
		t.Errorf("weekdays with a holiday: %d gaps, longest %+v; want 1, the holiday (25h where 1h is usual)", in.Gaps, in.Longest)
	}
}

// TestInspectJumpsAreBeyondRobustSigma: returns of ±1 % have a robust σ
// of 1.4826 %; one return of ln 0.5 (a 2:1 split not adjusted for) is a
// jump of about 46 σ, and nothing else is.
func TestInspectJumpsAreBeyondRobustSigma(t *testing.T) {
	start := utc("2024-01-01 00:00:00")
	var ts []time.Time
	for h := range 1001 {
		ts = append(ts, start.Add(time.Duration(h)*time.Hour))
	}
	r := alternating(1000, 0.01)
	r[500] = math.Log(0.5)
	in := Inspect(barsAt(ts, r), 10)
	if in.Jumps != 1 || len(in.TopJumps) != 1 {
		t.Fatalf("%d jumps (%+v), want 1", in.Jumps, in.TopJumps)
	}
	j := in.TopJumps[0]
	// 499 returns of +0.01, 500 of −0.01 and one of ln 0.5: the median is
	// −0.01, the absolute deviations are 0 (500 of them), 0.02 (499) and
	// |ln 0.5 + 0.01|, so the MAD is (0 + 0.02) / 2 = 0.01.
	wantSigma := 1.4826 * 0.01
	wantZ := math.Abs(math.Log(0.5)+0.01) / wantSigma
	if !relNear(in.ReturnSigma, wantSigma, 1e-9) || !j.Time.Equal(ts[501]) || !relNear(j.Ratio, 0.5, 1e-12) ||
		!relNear(j.Sigmas, wantZ, 1e-9) {
		t.Errorf("σ %v, jump %+v; want σ %v, the bar at %v, ratio 0.5, %.4f σ", in.ReturnSigma, j, wantSigma, ts[501], wantZ)
	}
}

// TestInspectSpreadStatistics: the spread in bps of the open, its median,
// 95th percentile (linear between order statistics) and share ≤ 0.
func TestInspectSpreadStatistics(t *testing.T) {
	start := utc("2024-01-01 00:00:00")
	var ts []time.Time
	for h := range 21 {
		ts = append(ts, start.Add(time.Duration(h)*time.Hour))
	}
	b := barsAt(ts, make([]float64, 20))
	for i := range 21 {
		b.Spread = append(b.Spread, float64(i)*0.001) // i × 0.1 bps of 100; the first is 0
	}
	in := Inspect(b, 10)
	s := in.Spread
	if s == nil || !relNear(s.MedianBps, 1.0, 1e-9) || !relNear(s.P95Bps, 1.9, 1e-9) || !relNear(s.NonPositive, 1.0/21, 1e-12) {
		t.Errorf("spread %+v, want median 1 bp, p95 1.9 bps, 1/21 ≤ 0", s)
	}
}

// TestInspectJumpsOfAMarketThatMostlyStandsStill: when more than half the
// returns are 0 (MAD 0), σ is √(π/2) × the mean absolute deviation, so
// that a one-tick move is no jump but a halving still is.
func TestInspectJumpsOfAMarketThatMostlyStandsStill(t *testing.T) {
	start := utc("2024-01-01 00:00:00")
	var ts []time.Time
	for h := range 1001 {
		ts = append(ts, start.Add(time.Duration(h)*time.Hour))
	}
	r := make([]float64, 1000)
	for i := 0; i < 1000; i += 5 { // one bar in five moves a tick
		r[i] = 0.01
		if i%10 == 0 {
			r[i] = -0.01
		}
	}
	r[503] = math.Log(0.5)
	in := Inspect(barsAt(ts, r), 10)
	var mean float64
	for _, x := range r {
		mean += math.Abs(x)
	}
	mean /= float64(len(r))
	if want := math.Sqrt(math.Pi/2) * mean; !relNear(in.ReturnSigma, want, 1e-9) {
		t.Errorf("σ %v, want √(π/2) × mean |r| = %v", in.ReturnSigma, want)
	}
	if in.Jumps != 1 || !in.TopJumps[0].Time.Equal(ts[504]) {
		t.Errorf("%d jumps (%+v), want the halving alone", in.Jumps, in.TopJumps)
	}
}
