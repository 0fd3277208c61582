package prices

import (
	"sort"
	"time"
)

// Bars is an OHLC(V) price series in time order. All slices have the same
// length; Volume is all zero when the source has no volume column.
type Bars struct {
	Name      string // where the bars came from (file name, "synthetic")
	Time      []time.Time
	Open      []float64
	High      []float64
	Low       []float64
	Close     []float64
	Volume    []float64
	HasVolume bool
	// Spread is the ask minus the bid at each bar's open, in price points,
	// for a source that quotes both (LEAN's forex bars); Open, High, Low
	// and Close are then the mid prices. Nil when the source has no bid
	// and ask: costs then come from the instrument alone.
	Spread []float64
	// Origin says how the bars were read: the file format found, and for
	// LEAN equity bars whether they are adjusted for splits and
	// dividends (format.go). Zero for synthetic bars.
	Origin Origin
}

// Len is the number of bars.
func (b *Bars) Len() int { return len(b.Close) }

// add appends one checked bar: its time, open, high, low, close and volume.
func (b *Bars) add(t time.Time, o, h, l, c, v float64) {
	b.Time = append(b.Time, t)
	b.Open = append(b.Open, o)
	b.High = append(b.High, h)
	b.Low = append(b.Low, l)
	b.Close = append(b.Close, c)
	b.Volume = append(b.Volume, v)
}

// Slice returns bars [i, j) sharing storage with b.
func (b *Bars) Slice(i, j int) *Bars {
	return &Bars{
		Name: b.Name, Time: b.Time[i:j], Open: b.Open[i:j], High: b.High[i:j],
		Low: b.Low[i:j], Close: b.Close[i:j], Volume: b.Volume[i:j], HasVolume: b.HasVolume,
		Spread: sliceOrNil(b.Spread, i, j), Origin: b.Origin,
	}
}

// sliceOrNil is s[i:j], or nil when s is nil.
func sliceOrNil(s []float64, i, j int) []float64 {
	if s == nil {
		return nil
	}
	return s[i:j]
}

// Index returns the index of the first bar at or after t (Len() if none).
func (b *Bars) Index(t time.Time) int {
	return sort.Search(len(b.Time), func(i int) bool { return !b.Time[i].Before(t) })
}
