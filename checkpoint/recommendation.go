package checkpoint

import (
	"fmt"
	"math"
	"strconv"
)

// Recommendation keys: what the run that chose a checkpoint recommended
// doing with it (ADR 0016). A run writes them into the checkpoint it chose
// (the best by validation Sharpe), and only there; a checkpoint without
// them (any other epoch, or one written before they existed) says nothing.
// Numbers are written with strconv.FormatFloat(v, 'g', -1, 64), which
// reads back to the same float64.
const (
	MetaValidSharpe    = "valid_sharpe"   // the checkpoint's validation Sharpe, bar returns annualised
	MetaValidT         = "valid_t"        // its t-statistic, sim.Report.SharpeT
	MetaMinValidT      = "min_valid_t"    // the run's backtest.min_valid_t (0: the gate was off)
	MetaRecommendation = "recommendation" // RecommendTrade or RecommendFlat
)

// The values of MetaRecommendation.
const (
	// RecommendTrade: the run vouches for the checkpoint (its validation
	// t reached backtest.min_valid_t, or the gate was off).
	RecommendTrade = "trade"
	// RecommendFlat: the run abstained; it recommends staying flat, not
	// trading the checkpoint.
	RecommendFlat = "flat"
)

// Recommendation is what a run recommended doing with the checkpoint it
// chose, and the evidence behind it.
type Recommendation struct {
	ValidSharpe float64 `json:"validation_sharpe"`
	ValidT      float64 `json:"validation_sharpe_t"`
	MinValidT   float64 `json:"min_valid_t"`
	// Recommendation is RecommendTrade or RecommendFlat.
	Recommendation string `json:"recommendation"`
}

// NewRecommendation is the recommendation of a run whose chosen
// checkpoint had validation Sharpe validSharpe with t-statistic validT,
// under backtest.min_valid_t minValidT; abstained is the run's verdict
// (config.BacktestConfig.NoEdge), flat when set.
func NewRecommendation(validSharpe, validT, minValidT float64, abstained bool) Recommendation {
	r := Recommendation{ValidSharpe: validSharpe, ValidT: validT, MinValidT: minValidT, Recommendation: RecommendTrade}
	if abstained {
		r.Recommendation = RecommendFlat
	}
	return r
}

// Flat reports whether the run recommended staying flat.
func (r Recommendation) Flat() bool { return r.Recommendation == RecommendFlat }

// recommendationKeys are the keys SetRecommendation writes, in the order
// ReadRecommendation checks them.
var recommendationKeys = []string{MetaValidSharpe, MetaValidT, MetaMinValidT, MetaRecommendation}

// SetRecommendation records r in meta under the Recommendation keys.
func SetRecommendation(meta map[string]string, r Recommendation) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	meta[MetaValidSharpe] = f(r.ValidSharpe)
	meta[MetaValidT] = f(r.ValidT)
	meta[MetaMinValidT] = f(r.MinValidT)
	meta[MetaRecommendation] = r.Recommendation
}

// ReadRecommendation reads back what SetRecommendation recorded in meta.
// ok is false, with no error, when meta holds none of the keys (a
// checkpoint no run chose, or an older one). Some keys without the others,
// a number that does not parse, a min_valid_t that is negative or not
// finite, or a recommendation other than "trade" or "flat" is an error
// that names the key and its value. A validation Sharpe or t may be NaN
// (a run records what it measured; a NaN t never reaches the gate).
func ReadRecommendation(meta map[string]string) (r Recommendation, ok bool, err error) {
	n := 0
	for _, k := range recommendationKeys {
		if _, has := meta[k]; has {
			n++
		}
	}
	if n == 0 {
		return r, false, nil
	}
	for _, k := range recommendationKeys {
		if _, has := meta[k]; !has {
			return r, false, fmt.Errorf("checkpoint metadata has %d of the run's recommendation keys but not %q: a run writes all of %v", n, k, recommendationKeys)
		}
	}
	num := func(key string) (float64, error) {
		v, err := strconv.ParseFloat(meta[key], 64)
		if err != nil {
			return 0, fmt.Errorf("checkpoint metadata %q = %q: not a number", key, meta[key])
		}
		return v, nil
	}
	if r.ValidSharpe, err = num(MetaValidSharpe); err != nil {
		return Recommendation{}, false, err
	}
	if r.ValidT, err = num(MetaValidT); err != nil {
		return Recommendation{}, false, err
	}
	if r.MinValidT, err = num(MetaMinValidT); err != nil {
		return Recommendation{}, false, err
	}
	if !(r.MinValidT >= 0) || math.IsInf(r.MinValidT, 1) {
		return Recommendation{}, false, fmt.Errorf("checkpoint metadata %q = %q: want a finite number, 0 or more (backtest.min_valid_t)", MetaMinValidT, meta[MetaMinValidT])
	}
	switch r.Recommendation = meta[MetaRecommendation]; r.Recommendation {
	case RecommendTrade, RecommendFlat:
	default:
		return Recommendation{}, false, fmt.Errorf("checkpoint metadata %q = %q: want %q or %q", MetaRecommendation, r.Recommendation, RecommendTrade, RecommendFlat)
	}
	return r, true, nil
}
