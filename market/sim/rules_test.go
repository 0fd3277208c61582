package sim

import (
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// TestRuleHoldsTheDirectionOfTheLookbackChange works rules by hand over
// closes 1, 2, 3, 3, 1, 1: with a lookback of 2 the changes at bars 2 to 5
// are +2, +1, −2, −2 (flat before bar 2); with 3, at bars 3 to 5, +2, −1,
// −2. Momentum follows them, reversal goes against them, and long-only is
// flat where the other would be short.
func TestRuleHoldsTheDirectionOfTheLookbackChange(t *testing.T) {
	b := &prices.Bars{Close: []float64{1, 2, 3, 3, 1, 1}}
	const F, L, S = 1, 2, 0 // directions: flat, long, short
	for _, c := range []struct {
		r    Rule
		name string
		want []int // direction at t = 0..5
	}{
		{Rule{Lookback: 2}, "momentum 2", []int{F, F, L, L, S, S}},
		{Rule{Lookback: 2, LongOnly: true}, "momentum 2 long-only", []int{F, F, L, L, F, F}},
		{Rule{Lookback: 2, Reverse: true}, "reversal 2", []int{F, F, S, S, L, L}},
		{Rule{Lookback: 2, Reverse: true, LongOnly: true}, "reversal 2 long-only", []int{F, F, F, F, L, L}},
		{Rule{Lookback: 3}, "momentum 3", []int{F, F, F, L, S, S}},
		{Rule{Lookback: 1}, "momentum 1", []int{F, L, L, F, S, F}}, // a zero change is flat
	} {
		if c.r.Name() != c.name {
			t.Errorf("%+v: name %q, want %q", c.r, c.r.Name(), c.name)
		}
		p := c.r.Policy(b)
		for i, want := range c.want {
			a := p.Act(i, nil)
			if a.Dir != want {
				t.Errorf("%s at bar %d: direction %d, want %d", c.name, i, a.Dir, want)
			}
			if a.Dir != F && (a.Size != market.NumSizes-1 || a.Exit != 0) {
				t.Errorf("%s at bar %d: size %d exit %d, want a full position without a stop", c.name, i, a.Size, a.Exit)
			}
		}
	}
	if n := len(Rules([]int{6, 24})); n != 8 {
		t.Errorf("Rules of two lookbacks: %d rules, want 8", n)
	}
}

// TestLookbacksAreChecked: the list names the item it refuses and why.
func TestLookbacksAreChecked(t *testing.T) {
	got, err := ParseLookbacks(" 3,24 ,120", 1000)
	if err != nil || len(got) != 3 || got[0] != 3 || got[1] != 24 || got[2] != 120 {
		t.Fatalf("ParseLookbacks: %v, %v", got, err)
	}
	for s, want := range map[string]string{
		"3,x":     `item 2 "x": not a whole number`,
		"0":       "item 1 0: want 1 to 1000",
		"3,2000":  "item 2 2000: want 1 to 1000",
		"24,6,24": "item 3 24: listed twice",
		"":        `item 1 "": not a whole number`,
	} {
		if _, err := ParseLookbacks(s, 1000); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseLookbacks(%q) = %v; want an error with %q", s, err, want)
		}
	}
}
