package prices

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/dqnflow/dqnflow/stats"
)

// Inspection is what `dqnflow data inspect` reports of one series: its
// calendar (bar size, gaps), its suspicious moves (jumps) and, where it
// quotes a bid and an ask, its spread (docs/adr/0035-corpus-formats.md).
type Inspection struct {
	Bars  int       `json:"bars"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// BarSize is the median spacing of consecutive bars.
	BarSize Duration `json:"bar_size"`
	// Gaps counts the spacings that are at least two bars longer than the
	// usual spacing after a bar of the same weekday and hour (UTC): for
	// a market open around the clock, a spacing over 3 × BarSize; a
	// market's nightly and weekend closures, being usual, are no gaps,
	// but a holiday or missing data is (Gap says how the usual spacing is
	// found).
	Gaps int `json:"gaps"`
	// Longest is the longest gap, nil when there is none.
	Longest *Gap `json:"longest_gap,omitempty"`
	// JumpSigma is the threshold of Jumps, in robust standard deviations.
	JumpSigma float64 `json:"jump_sigma"`
	// ReturnSigma is the robust standard deviation of the close-to-close
	// log returns: 1.4826 × their median absolute deviation (MAD), or,
	// when more than half the returns are the median (MAD 0), √(π/2) ×
	// their mean absolute deviation.
	ReturnSigma float64 `json:"return_sigma"`
	// Jumps counts the close-to-close log returns farther than JumpSigma
	// × ReturnSigma from their median: splits not adjusted for, bad
	// ticks, or real crashes.
	Jumps int `json:"jumps"`
	// TopJumps are the largest of them (at most 10), largest first.
	TopJumps []Jump `json:"top_jumps,omitempty"`
	// Spread is the spread's statistics, nil without bid and ask.
	Spread *SpreadStats `json:"spread,omitempty"`
}

// Gap is one spacing between consecutive bars.
type Gap struct {
	// From is the bar before the gap, To the bar after it.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Length is To − From; Usual is the usual spacing after a bar of
	// From's weekday and hour.
	Length Duration `json:"length"`
	Usual  Duration `json:"usual"`
}

// Jump is one close-to-close move.
type Jump struct {
	Time time.Time `json:"time"` // the bar whose close moved
	// LogReturn is ln(close / previous close); Sigmas its distance from
	// the median return in ReturnSigmas.
	LogReturn float64 `json:"log_return"`
	Sigmas    float64 `json:"sigmas"`
	// Ratio is close / previous close (7:1 split: about 1/7).
	Ratio float64 `json:"ratio"`
}

// SpreadStats are the statistics of Bars.Spread, in basis points of the
// bar's open (a mid).
type SpreadStats struct {
	MedianBps float64 `json:"median_bps"`
	P95Bps    float64 `json:"p95_bps"`
	// NonPositive is the share of bars whose spread is 0 or less.
	NonPositive float64 `json:"non_positive_share"`
}

// Duration is a time.Duration that JSON writes as its String ("1h0m0s").
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as time.Duration's String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Inspect computes b's Inspection, with jumps beyond jumpSigma robust
// standard deviations.
//
// Gaps: the usual spacing after a bar is the median spacing after the
// bars that start on the same weekday at the same hour (UTC), when at
// least 4 bars do, else BarSize; a spacing is a gap when it exceeds the
// usual one by more than 2 × BarSize. A market's regular closures (the
// night, the weekend) are usual, and so are no gaps; a closure that
// follows a weekday-hour on fewer than half its occurrences (a holiday,
// missing data) is. For bars around the clock the test is spacing > 3 ×
// BarSize.
func Inspect(b *Bars, jumpSigma float64) Inspection {
	n := b.Len()
	in := Inspection{Bars: n, JumpSigma: jumpSigma}
	if n == 0 {
		return in
	}
	in.First, in.Last = b.Time[0], b.Time[n-1]
	if n < 2 {
		return in
	}
	space := make([]time.Duration, n-1)
	for i := range space {
		space[i] = b.Time[i+1].Sub(b.Time[i])
	}
	barSize := medianDuration(slices.Clone(space))
	in.BarSize = Duration(barSize)

	// The usual spacing after each weekday-hour slot.
	var slot [7 * 24][]time.Duration
	key := func(t time.Time) int { return int(t.Weekday())*24 + t.Hour() }
	for i, s := range space {
		k := key(b.Time[i])
		slot[k] = append(slot[k], s)
	}
	var usual [7 * 24]time.Duration
	for k := range slot {
		usual[k] = barSize
		if len(slot[k]) >= 4 {
			usual[k] = medianDuration(slot[k])
		}
	}
	for i, s := range space {
		u := usual[key(b.Time[i])]
		if s-u > 2*barSize {
			in.Gaps++
			if in.Longest == nil || s > time.Duration(in.Longest.Length) {
				in.Longest = &Gap{From: b.Time[i], To: b.Time[i+1], Length: Duration(s), Usual: Duration(u)}
			}
		}
	}

	// Jumps: log returns beyond jumpSigma robust σ of their median.
	r := make([]float64, n-1)
	for i := range r {
		r[i] = math.Log(b.Close[i+1] / b.Close[i])
	}
	med := medianFloat(slices.Clone(r))
	dev := make([]float64, len(r))
	for i, x := range r {
		dev[i] = math.Abs(x - med)
	}
	sigma := 1.4826 * medianFloat(slices.Clone(dev))
	if sigma == 0 {
		// More than half the bars did not move (an illiquid market, a
		// coarse tick): the MAD is 0 and would make every move a jump.
		// The mean absolute deviation, × √(π/2) for a normal σ, still
		// sees the moves there are.
		sigma = math.Sqrt(math.Pi/2) * stats.Mean(dev)
	}
	in.ReturnSigma = sigma
	var jumps []Jump
	for i, x := range r {
		z := math.Abs(x - med)
		if sigma > 0 {
			z /= sigma
		} else if z > 0 {
			z = math.Inf(1)
		}
		if z > jumpSigma {
			jumps = append(jumps, Jump{Time: b.Time[i+1], LogReturn: x, Sigmas: z, Ratio: math.Exp(x)})
		}
	}
	in.Jumps = len(jumps)
	sort.SliceStable(jumps, func(i, j int) bool { return jumps[i].Sigmas > jumps[j].Sigmas })
	in.TopJumps = jumps[:min(len(jumps), 10)]

	if b.Spread != nil {
		bps := make([]float64, n)
		nonPos := 0
		for i, s := range b.Spread {
			bps[i] = s / b.Open[i] * 1e4
			if s <= 0 {
				nonPos++
			}
		}
		slices.Sort(bps)
		in.Spread = &SpreadStats{MedianBps: quantile(bps, 0.5), P95Bps: quantile(bps, 0.95), NonPositive: float64(nonPos) / float64(n)}
	}
	return in
}

// medianDuration is the median of d (reordered); the upper one of an
// even count.
func medianDuration(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// medianFloat is the median of x (reordered), the mean of the middle two
// of an even count.
func medianFloat(x []float64) float64 {
	slices.Sort(x)
	return quantile(x, 0.5)
}

// quantile is the q-quantile of sorted x, linearly interpolated between
// order statistics (type 7 of Hyndman and Fan, R's default).
func quantile(x []float64, q float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	h := q * float64(len(x)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(x) {
		return x[len(x)-1]
	}
	return x[lo] + (h-float64(lo))*(x[lo+1]-x[lo])
}
