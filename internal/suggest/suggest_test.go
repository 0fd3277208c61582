package suggest

import "testing"

// TestDistanceOfHandWorkedPairs checks the distance against pairs worked
// by hand, including the swap that plain Levenshtein counts as two edits.
func TestDistanceOfHandWorkedPairs(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"train", "train", 0},
		{"trian", "train", 1},    // one swap
		{"epoks", "epochs", 2},   // k→c, insert h
		{"kitten", "sitting", 3}, // the textbook case
		{"lerning_rate", "learning_rate", 1},
		{"ca", "abc", 3}, // OSA, not full Damerau (which gives 2)
		{"ε", "e", 1},    // runes, not bytes
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetry)", c.b, c.a, got, c.want)
		}
	}
}

// TestNearestSuggestsOnlyWhatIsClose: a near miss gets its candidate, a
// prefix of three or more characters gets the one it starts, and a word
// far from every candidate gets nothing.
func TestNearestSuggestsOnlyWhatIsClose(t *testing.T) {
	cmds := []string{"train", "backtest", "report", "run", "worker", "doctor"}
	for _, c := range []struct {
		typed string
		cands []string
		want  string
	}{
		{"trian", cmds, "train"},
		{"reprot", cmds, "report"},
		{"RUN", cmds, "run"},
		{"frobnicate", cmds, ""},
		{"docter", cmds, "doctor"},
		{"met", []string{"json", "metrics-addr"}, "metrics-addr"},
		{"me", []string{"json", "metrics-addr"}, ""},
		{"epoks", []string{"epoch", "epochs", "out"}, "epoch"}, // both 2 edits: the first listed
		{"x", []string{"y"}, "y"},                              // within the floor of 2 edits
	} {
		if got := Nearest(c.typed, c.cands); got != c.want {
			t.Errorf("Nearest(%q, %v) = %q, want %q", c.typed, c.cands, got, c.want)
		}
	}
}
