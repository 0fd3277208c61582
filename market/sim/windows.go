package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/market"
)

// checkSegments says whether segs tile r exactly (contiguous, in order,
// From of the first r.From, To of the last r.To), each with a positive,
// finite weight and at least l bars (one window).
func checkSegments(segs []market.Segment, r market.Range, l int) error {
	at := r.From
	for k, s := range segs {
		switch {
		case s.From != at:
			return fmt.Errorf("panel segment %d (%s) starts at bar %d, want %d: the segments must tile the training range %s", k, s.Name, s.From, at, r)
		case s.Len() < l:
			return fmt.Errorf("panel segment %d (%s) holds %d bars, fewer than one episode window of %d", k, s.Name, s.Len(), l)
		case !(s.Weight > 0) || math.IsInf(s.Weight, 0):
			return fmt.Errorf("panel segment %d (%s) has weight %g: must be positive and finite", k, s.Name, s.Weight)
		}
		at = s.To
	}
	if at != r.To {
		return fmt.Errorf("panel segments end at bar %d, the training range %s at %d", at, r, r.To)
	}
	return nil
}

// WindowStart draws the first bar of an episode window of
// l = min(episodeBars, r.Len()) bars inside r from rng. With zero or one
// segment it is uniform over r.From … r.To−l, one rng.IntN draw (the
// draw VecEnv has always made, so a single-series run's stream is
// unchanged). With several, it draws the segment first, k with
// probability w_k/Σw (one rng.Float64 against market.SegmentCumulative), then
// the start uniformly over segment k's From … To−l, so the window never
// crosses into another series. segs must tile r (market.JoinPanel's do).
func WindowStart(rng *rand.Rand, segs []market.Segment, r market.Range, episodeBars int) int {
	l := min(episodeBars, r.Len())
	if len(segs) <= 1 {
		return windowStart(rng, nil, nil, r, l)
	}
	return windowStart(rng, segs, market.SegmentCumulative(segs), r, l)
}

// windowStart is WindowStart with the cumulative weights cum computed
// once (VecEnv keeps them).
func windowStart(rng *rand.Rand, segs []market.Segment, cum []float64, r market.Range, l int) int {
	if len(segs) > 1 {
		u := rng.Float64()
		k := len(segs) - 1
		for j, c := range cum {
			if u < c {
				k = j
				break
			}
		}
		r = market.Range{From: segs[k].From, To: segs[k].To}
	}
	s := r.From
	if free := r.Len() - l; free > 0 {
		s += rng.IntN(free + 1)
	}
	return s
}
