package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// Rule is one of the simple trading rules an agent is compared with
// (`dqnflow baselines`): time-series momentum, or its reverse, over a
// lookback of closes. At bar t it compares close[t] with close[t−Lookback]
// and holds a full position (MaxContracts, no stop) in the direction of
// the change (Reverse: against it); LongOnly is flat where the other
// would be short. It is flat before it has Lookback bars of history and
// where the change is zero. Like the agent it decides at bar t's close and
// fills at the next open, so it pays the same costs (Backtest).
type Rule struct {
	Lookback int
	Reverse  bool
	LongOnly bool
}

// Name is the rule's name: "momentum 24", "reversal 6 long-only".
func (r Rule) Name() string {
	s := "momentum"
	if r.Reverse {
		s = "reversal"
	}
	s += " " + strconv.Itoa(r.Lookback)
	if r.LongOnly {
		s += " long-only"
	}
	return s
}

// Policy is r on the closes of b.
func (r Rule) Policy(b *prices.Bars) Policy { return rulePolicy{r, b.Close} }

type rulePolicy struct {
	r     Rule
	close []float64
}

func (p rulePolicy) Act(t int, _ []float32) market.Action {
	flat := market.Action{Dir: 1}
	if t < p.r.Lookback || t >= len(p.close) {
		return flat
	}
	d := p.close[t] - p.close[t-p.r.Lookback]
	if p.r.Reverse {
		d = -d
	}
	switch {
	case d > 0:
		return market.Action{Dir: 2, Size: market.NumSizes - 1}
	case d < 0 && !p.r.LongOnly:
		return market.Action{Dir: 0, Size: market.NumSizes - 1}
	}
	return flat
}

// DefaultLookbacks are the lookbacks of Rules' default family, in bars:
// from a few hours to about a month of hourly bars.
var DefaultLookbacks = []int{3, 6, 12, 24, 48, 120, 240, 480}

// Rules is the family of rules over the given lookbacks: momentum and
// reversal, each long-short and long-only, in that order per lookback.
func Rules(lookbacks []int) []Rule {
	var out []Rule
	for _, k := range lookbacks {
		for _, rev := range []bool{false, true} {
			for _, lo := range []bool{false, true} {
				out = append(out, Rule{Lookback: k, Reverse: rev, LongOnly: lo})
			}
		}
	}
	return out
}

// ParseLookbacks reads a comma-separated list of positive lookbacks in
// bars ("3,24,120"), each at most max; the error names the item and why.
func ParseLookbacks(s string, max int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		k, err := strconv.Atoi(f)
		switch {
		case err != nil:
			return nil, fmt.Errorf("item %d %q: not a whole number of bars", i+1, f)
		case k < 1 || k > max:
			return nil, fmt.Errorf("item %d %d: want 1 to %d bars", i+1, k, max)
		case seen[k]:
			return nil, fmt.Errorf("item %d %d: listed twice", i+1, k)
		}
		seen[k] = true
		out = append(out, k)
	}
	return out, nil
}
