// Package suggest finds the known name nearest to a mistyped one: the
// "did you mean" of a command, a flag or a config key.
package suggest

import "strings"

// Nearest returns the candidate closest to typed, or "" when none is close
// enough to be what the user meant (NearestIndex says how close).
func Nearest(typed string, candidates []string) string {
	if i := NearestIndex(typed, candidates); i >= 0 {
		return candidates[i]
	}
	return ""
}

// NearestIndex returns the index of the candidate closest to typed, or -1
// when none is close enough to be what the user meant. Closeness is the
// optimal string alignment distance (Levenshtein with adjacent
// transpositions counted as one edit, so "trian" is one edit from
// "train"), compared without regard to case; a candidate within
// max(2, len(typed)/3) edits qualifies, as does one that typed is a prefix
// of (at least 3 characters: "--met" for "--metrics-addr"). Ties go to the
// earlier candidate, so callers list the likelier ones first.
func NearestIndex(typed string, candidates []string) int {
	best, bestDist := -1, -1
	limit := max(2, len([]rune(typed))/3)
	low := strings.ToLower(typed)
	for i, c := range candidates {
		lc := strings.ToLower(c)
		d := Distance(low, lc)
		if d > limit && !(len(low) >= 3 && strings.HasPrefix(lc, low)) {
			continue
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = i, d
		}
	}
	return best
}

// Distance is the optimal string alignment distance between a and b: the
// fewest insertions, deletions, substitutions and swaps of two adjacent
// characters that turn a into b, where no character is edited twice
// (Damerau 1964; the restricted form, Boytsov 2011, §2.2). It works on
// runes, in O(len(a)·len(b)) time and O(len(b)) memory for three rows.
func Distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	prev2 := make([]int, len(t)+1) // row i-2
	prev := make([]int, len(t)+1)  // row i-1
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
