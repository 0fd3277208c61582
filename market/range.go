package market

import "fmt"

// Range is a half-open range of bar indices [From, To) of one prices.Bars.
type Range struct {
	From, To int
}

// Len is the number of bars in the range.
func (r Range) Len() int { return r.To - r.From }

func (r Range) String() string { return fmt.Sprintf("[%d, %d)", r.From, r.To) }
