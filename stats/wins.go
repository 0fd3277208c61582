package stats

import "math"

// Proportion is a share of wins among N comparisons with its Wilson
// score interval.
type Proportion struct {
	Wins  int     `json:"wins"`
	N     int     `json:"n"`
	Share float64 `json:"share"` // Wins/N
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Level float64 `json:"level"`
}

// Wilson is the share wins/n with the Wilson (1927) score interval at the
// two-sided level, z = Φ⁻¹((1 + level)/2):
//
//	centre = (p̂ + z²/2n) / (1 + z²/n)
//	half   = z/(1 + z²/n) · √(p̂(1 − p̂)/n + z²/4n²)
//
// Unlike p̂ ± z·√(p̂(1−p̂)/n) it stays inside [0, 1] and does not collapse
// to a point at 0 or n wins, which matter with a few dozen windows: 8 wins
// of 10 give [0.490, 0.943] at 95 %. The bound is exactly 0 at 0 wins and
// exactly 1 at n wins.
func Wilson(wins, n int, level float64) (Proportion, error) {
	if n < 1 || wins < 0 || wins > n {
		return Proportion{}, inputErr("wins %d of n %d: needs n ≥ 1 and 0 ≤ wins ≤ n", wins, n)
	}
	if !(level > 0 && level < 1) {
		return Proportion{}, inputErr("level %v: must lie in (0, 1), e.g. 0.95", level)
	}
	z := NormQuantile((1 + level) / 2)
	nf := float64(n)
	p := float64(wins) / nf
	den := 1 + z*z/nf
	centre := (p + z*z/(2*nf)) / den
	half := z / den * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	pr := Proportion{Wins: wins, N: n, Share: p, Lo: max(0, centre-half), Hi: min(1, centre+half), Level: level}
	if wins == 0 {
		pr.Lo = 0
	}
	if wins == n {
		pr.Hi = 1
	}
	return pr, nil
}

// ShareOfWins is the share of windows (or series) where the agent's Sharpe
// ratio is strictly above the baseline's, agent[i] against baseline[i],
// with its Wilson interval at level. A tie is not a win: a flat agent
// does not beat a flat baseline. Call it once per baseline.
func ShareOfWins(agent, baseline []float64, level float64) (Proportion, error) {
	if len(agent) != len(baseline) {
		return Proportion{}, inputErr("agent has %d Sharpe ratios and baseline %d: one each per window", len(agent), len(baseline))
	}
	if len(agent) == 0 {
		return Proportion{}, inputErr("agent: no Sharpe ratios given")
	}
	if err := checkFinite("agent", agent); err != nil {
		return Proportion{}, err
	}
	if err := checkFinite("baseline", baseline); err != nil {
		return Proportion{}, err
	}
	wins := 0
	for i, a := range agent {
		if a > baseline[i] {
			wins++
		}
	}
	return Wilson(wins, len(agent), level)
}
