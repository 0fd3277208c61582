package evaluation

import (
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
)

// RunRecommendation is the recommendation that the run which chose ck
// (read from path) recorded in it: nil when ck has none (a checkpoint no
// run chose, or an older one); a malformed one is an error naming path.
func RunRecommendation(ck *checkpoint.Checkpoint, path string) (*checkpoint.Recommendation, error) {
	r, ok, err := checkpoint.ReadRecommendation(ck.Meta)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if !ok {
		return nil, nil
	}
	return &r, nil
}

// FlatNotice is the sentence that evaluate, backtest and report say above
// a checkpoint's figures when its own run recommended staying flat
// (ADR 0016); "" when it did not, or recorded nothing.
func FlatNotice(r *checkpoint.Recommendation) string {
	if r == nil || !r.Flat() {
		return ""
	}
	return fmt.Sprintf("this checkpoint's run recommended staying flat: validation t %.2f < backtest.min_valid_t %.2f (ADR 0016); the figures below trade it anyway",
		r.ValidT, r.MinValidT)
}
