package model_test

import (
	"math"
	"testing"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// TestGreedyNeedsTheMarginOverFlat checks model.Greedy on hand-worked Q
// values: the size and exit branches are plain argmaxes (first on ties);
// the direction is the argmax unless a position beats flat by less than
// the margin, and margin 0 is the plain argmax, ties included.
func TestGreedyNeedsTheMarginOverFlat(t *testing.T) {
	sizeExit := []float32{0.1, 0.4, 0.4, -1, 0, 2, 2} // size argmax 1, exit argmax 1 (first on ties)
	q := func(short, flat, long float32) []float32 {
		return append([]float32{short, flat, long}, sizeExit...)
	}
	for _, c := range []struct {
		name   string
		q      []float32
		margin float32
		dir    int
	}{
		{"margin 0: long is the argmax", q(0, 0.1, 0.3), 0, 2},
		{"margin 0: short ties flat, first wins", q(0.2, 0.2, 0.1), 0, 0},
		{"margin 0: flat ties long, first wins", q(-1, 0.5, 0.5), 0, 1},
		{"long beats flat by more than the margin", q(0, 0.1, 0.3), 0.15, 2},
		{"long beats flat by exactly the margin", q(0, 0.25, 0.5), 0.25, 2},
		{"long beats flat by less than the margin", q(0, 0.1, 0.3), 0.25, 1},
		{"short beats flat by less than the margin", q(-0.5, -0.55, -0.9), 0.1, 1},
		{"short beats flat by more than the margin", q(0.5, 0.2, 0.1), 0.1, 0},
		{"flat is the argmax whatever the margin", q(0.1, 0.2, 0.1), 5, 1},
		{"the best position falls short, the other is not tried", q(0.29, 0.2, 0.3), 0.15, 1},
	} {
		a := model.Greedy(c.q, c.margin)
		want := market.Action{Dir: c.dir, Size: 1, Exit: 1}
		if a != want {
			t.Errorf("%s: Greedy(%v, %g) = %+v, want %+v", c.name, c.q[:3], c.margin, a, want)
		}
	}
}

// TestCheckMarginRejectsUnusableMargins: a margin must be finite and not
// negative.
func TestCheckMarginRejectsUnusableMargins(t *testing.T) {
	for _, m := range []float32{0, 0.05, 100} {
		if err := model.CheckMargin(m); err != nil {
			t.Errorf("CheckMargin(%g): %v", m, err)
		}
	}
	for _, m := range []float32{-0.01, float32(math.NaN()), float32(math.Inf(1))} {
		if err := model.CheckMargin(m); err == nil {
			t.Errorf("CheckMargin(%g) accepted it", m)
		}
	}
}
