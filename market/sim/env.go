package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// HeldScale is the number of bars at which the "bars held" agent feature
// saturates at 1. It is a constant rather than the episode length so that
// the feature means the same in training windows and in a backtest over a
// whole range.
const HeldScale = 256

// clipATR bounds the agent features measured in ATR units (unrealised P&L,
// stop distance), so that one wild bar cannot dominate the input.
const clipATR = 10

// VecEnv is N parallel futures environments over one Range of a Dataset.
// Every environment plays episodes on random windows of the range; all of
// them share the Dataset's bars, features and instrument.
//
// Episodes. A window is L = min(episodeBars, r.Len()) consecutive bars
// [start, start+L) with start drawn uniformly from r.From … r.To−L (so the
// window fits); on a panel (Dataset.Segments) the series is drawn first
// by its weight and the window lies inside it (WindowStart). Decisions
// are made at bars start … start+L−2; the step from the decision at
// start+L−2 to bar start+L−1 ends the episode (Done), any open position
// is closed at that bar's close (see below), and the environment starts
// a new random window. An episode is L−1 steps.
//
// Actions. Direction 0 short, 1 flat, 2 long; size k is
// max(1, round((k+1)/4 × MaxContracts)) contracts; exit rule 0 is none,
// 1 and 2 a stop at 1×ATR and 2×ATR. The target position is
// dir × contracts; flat is 0 whatever the size and exit rule.
//
// Timing and fills. The decision at bar t sees the observation of bar t
// (after its close). The order for Δ = target − position contracts fills
// at the open of bar t+1 plus slippage: a buy at open + s, a sell at
// open − s, s = SlippageTicks × TickSize, and pays Commission × |Δ|. A
// reversal trades both legs in one fill (long 2 → short 2 is 4 contracts).
//
// Stops. A stop is set whenever the position changes, from the price of
// that fill: F − k×ATR_t for a long, F + k×ATR_t for a short (k the exit
// rule, ATR_t the floored ATR of the decision bar, see below). When the
// target equals the position nothing trades and the stop stays where it
// is, unless the action's exit rule differs from the position's: then the
// new rule replaces it, placed k×ATR_t from the close of bar t (rule 0
// removes the stop). Inside bar t+1, after the open fill, a long is
// stopped when low ≤ stop and exits at min(open, stop) − s (a gap through
// the stop fills at the open); a short when high ≥ stop, at
// max(open, stop) + s; commission is paid on the exit. A stopped
// environment is flat until its next decision.
//
// Reward. The reward of the step t → t+1 is the change of mark-to-market
// equity over it, in money:
//
//	ΔE = p·(open_{t+1} − close_t)·PV                    old position p over the gap
//	   − |Δ|·(s·PV + Commission)                        the fill at the open
//	   + q·(close_{t+1} − open_{t+1})·PV                new position q to the close
//
// (with a stop, the last term becomes q·(exit − open_{t+1})·PV −
// |q|·Commission), divided by ATR_t × PV × MaxContracts, so a full position
// moving one ATR earns about 1 whatever the instrument (SetReward can scale
// it, charge a turnover penalty and make it a mean-variance utility). s
// and Commission are the instrument's slippage and commission at the fill
// price (Instrument). ATR_t is floored at
// max(ATR[t], TickSize, 1e-6·|close_t|, 1e-12) so a zero ATR (before it is
// defined) never gives an infinite reward. At the end of a window the open
// position is closed at close − s (long) or close + s (short) with
// commission, and that cost is part of the last reward, so Done is a true
// terminal state and Σ reward_t·ATR_t·PV·MaxContracts over an episode is
// its P&L, as a Backtest of the same actions would book it.
//
// Agent features (NumAgentFeatures, after the bar's NumFeatures):
//
//	0  position / MaxContracts                   signed, in [−1, 1]
//	1  |position| / MaxContracts
//	2  1 if long, else 0
//	3  1 if short, else 0
//	4  unrealised P&L per contract in ATR units, sign(p)·(close_t − entry)/ATR_t, clipped to ±10
//	5  bars held / HeldScale, at most 1 (bar closes since the position was opened or reversed)
//	6  stop distance in ATR units, sign(p)·(close_t − stop)/ATR_t, clipped to ±10; 0 without a stop
//	7  exit rule / 2 (0 when flat)
//
// entry is the contract-weighted average fill price of the open position.
//
// Random numbers. Window starts come from the *rand.Rand given to
// NewVecEnv, which the caller owns (and checkpoints). NewVecEnv draws the
// first windows from it; to resume exactly, build the environment, call
// SetState, then restore the random source's state.
//
// A VecEnv is not safe for concurrent use.
type VecEnv struct {
	eng         *engine
	r           market.Range
	episodeBars int
	rng         *rand.Rand

	segs []market.Segment // the panel's series (Dataset.Segments), nil for one series
	cum  []float64        // SegmentCumulative(segs)

	bar, start, end []int // decision bar and window [start, end) of each env
	acc             []account
	epReward        []float64 // sum of rewards of the running episode
	episodes        int64     // episodes finished since the environment was built (or restored)

	shape RewardShape // SetReward; Unshaped by default
}

// StepResult holds the outcome of one VecEnv.Step for all N environments.
// Step resizes the slices, so one StepResult can be reused.
type StepResult struct {
	Reward []float32 // scaled mark-to-market reward of each env
	// PnL is the change of each env's equity over the step in money
	// (ΔE of the Reward paragraph of VecEnv, the end-of-window close
	// included), before scaling: what a device implementation of the
	// environment is checked against in float64.
	PnL  []float64
	Done []bool // the env's window ended with this step
	// NextBar and NextAgent are the state reached by the step, before an
	// env whose window ended is reset: the bar t+1 and its N×NumAgentFeatures
	// agent features (all zero when the window ended, since the position was
	// closed). The next observation of a reset env is its new window's.
	NextBar   []int32
	NextAgent []float32
	// Episodes is the number of environments whose window ended.
	Episodes int
}

// NewVecEnv builds n environments over bars r of ds with episodes of
// episodeBars bars (the whole range when it is shorter), drawing window
// starts from rng. It checks ds over r and fails, naming the field, on
// inconsistent lengths, non-finite prices or an unusable instrument. When
// ds is a panel (Dataset.Segments), r must be its training range, which
// the segments tile.
func NewVecEnv(ds *market.Dataset, r market.Range, n, episodeBars int, rng *rand.Rand) (*VecEnv, error) {
	s, err := newEngine(ds, r)
	if err != nil {
		return nil, fmt.Errorf("new environment: %w", err)
	}
	if n < 1 {
		return nil, fmt.Errorf("new environment: %d environments: need at least 1", n)
	}
	if episodeBars < 2 {
		return nil, fmt.Errorf("new environment: episode of %d bars: need at least 2 (one decision and its fill)", episodeBars)
	}
	if rng == nil {
		return nil, fmt.Errorf("new environment: nil random source")
	}
	var segs []market.Segment
	var cum []float64
	if len(ds.Segments) > 1 {
		if err := checkSegments(ds.Segments, r, min(episodeBars, r.Len())); err != nil {
			return nil, fmt.Errorf("new environment: %w", err)
		}
		segs, cum = ds.Segments, market.SegmentCumulative(ds.Segments)
	}
	e := &VecEnv{
		segs: segs, cum: cum,
		eng: s, r: r, episodeBars: episodeBars, rng: rng,
		bar: make([]int, n), start: make([]int, n), end: make([]int, n),
		acc: make([]account, n), epReward: make([]float64, n),
		shape: Unshaped,
	}
	for i := range n {
		e.reset(i)
	}
	return e, nil
}

// windowLen is the number of bars of every window.
func (e *VecEnv) windowLen() int { return min(e.episodeBars, e.r.Len()) }

// reset starts env i on a new random window, flat.
func (e *VecEnv) reset(i int) {
	l := e.windowLen()
	s := windowStart(e.rng, e.segs, e.cum, e.r, l)
	e.start[i], e.end[i], e.bar[i] = s, s+l, s
	e.acc[i] = account{}
	e.epReward[i] = 0
}

// RewardShape shapes the training reward (the Reward paragraph of
// VecEnv). With r = ΔE/(ATR_t·PV·MaxContracts), the step's P&L in reward
// units, the reward is
//
//	Scale·(r − RiskAversion/2·r²) − TurnoverPenalty·|Δ|/MaxContracts
//
// for the |Δ| contracts the decision trades (stops and the end-of-window
// close excluded). Scale must be positive, the others not negative, all
// finite. The zero value is not valid; Unshaped is the plain P&L.
type RewardShape struct {
	Scale, TurnoverPenalty, RiskAversion float64
}

// Unshaped is the reward NewVecEnv starts with: r itself.
var Unshaped = RewardShape{Scale: 1}

// ShapeOf is the shaping a run's env section asks for: env.reward_scale,
// env.turnover_penalty and env.risk_aversion.
func ShapeOf(c config.EnvConfig) RewardShape {
	return RewardShape{Scale: c.RewardScale, TurnoverPenalty: c.TurnoverPenalty, RiskAversion: c.RiskAversion}
}

// reward is the shaped reward of a step whose P&L is dE money, unit the
// money of one ATR of a full position, that traded |Δ| = traded of
// maxContracts contracts, in float64. The GPU's env_step evaluates the
// same expression in the same order. With RiskAversion 0 the middle term
// is exactly 0, so the reward has the bits it had before the term existed.
func (s RewardShape) reward(dE, unit float64, traded, maxContracts int) float64 {
	r := dE / unit
	return s.Scale*dE/unit - 0.5*s.Scale*s.RiskAversion*r*r - s.TurnoverPenalty*float64(traded)/float64(maxContracts)
}

// SetReward sets the shaping of the training reward.
func (e *VecEnv) SetReward(s RewardShape) error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if !(s.Scale > 0) || !finite(s.Scale) || !(s.TurnoverPenalty >= 0) || !finite(s.TurnoverPenalty) ||
		!(s.RiskAversion >= 0) || !finite(s.RiskAversion) {
		return fmt.Errorf("set reward: scale %g must be positive, turnover penalty %g and risk aversion %g not negative, all finite",
			s.Scale, s.TurnoverPenalty, s.RiskAversion)
	}
	e.shape = s
	return nil
}

// N is the number of environments.
func (e *VecEnv) N() int { return len(e.bar) }

// Bar is the current decision bar of env i, 0 ≤ i < N.
func (e *VecEnv) Bar(i int) int { return e.bar[i] }

// Position is the signed number of contracts env i holds, 0 ≤ i < N.
func (e *VecEnv) Position(i int) int { return e.acc[i].pos }

// EpisodesDone is the number of episodes finished since NewVecEnv (a
// restored environment continues the saved count).
func (e *VecEnv) EpisodesDone() int64 { return e.episodes }

// Agent writes the NumAgentFeatures agent features of env i at its
// current bar into dst.
func (e *VecEnv) Agent(i int, dst []float32) error {
	if i < 0 || i >= len(e.bar) {
		return fmt.Errorf("agent features: env %d out of [0, %d)", i, len(e.bar))
	}
	if len(dst) < market.NumAgentFeatures {
		return fmt.Errorf("agent features: dst holds %d values, need %d", len(dst), market.NumAgentFeatures)
	}
	e.eng.agent(&e.acc[i], e.bar[i], dst)
	return nil
}

// Observe writes the N observations at the current bars into dst, row-major
// N×ObsDim: the bar's NumFeatures features, then the env's agent features.
func (e *VecEnv) Observe(dst []float32) error {
	if need := len(e.bar) * market.ObsDim; len(dst) < need {
		return fmt.Errorf("observe: dst holds %d values, need %d (%d envs × %d)", len(dst), need, len(e.bar), market.ObsDim)
	}
	for i, t := range e.bar {
		e.eng.observe(&e.acc[i], t, dst[i*market.ObsDim:(i+1)*market.ObsDim])
	}
	return nil
}

// Step applies one action per environment (fill at the next bar's open,
// stops inside that bar, mark to its close), writes rewards and the states
// reached into res, and resets the environments whose window ended. An
// invalid action is an error naming the env and branch, and nothing moves.
func (e *VecEnv) Step(actions []market.Action, res *StepResult) error {
	n := len(e.bar)
	if len(actions) != n {
		return fmt.Errorf("step: %d actions for %d environments", len(actions), n)
	}
	if res == nil {
		return fmt.Errorf("step: nil result")
	}
	for i, a := range actions {
		if err := a.Check(); err != nil {
			return fmt.Errorf("step: env %d: %w", i, err)
		}
	}
	res.Reward = resize(res.Reward, n)
	res.PnL = resize(res.PnL, n)
	res.Done = resize(res.Done, n)
	res.NextBar = resize(res.NextBar, n)
	res.NextAgent = resize(res.NextAgent, n*market.NumAgentFeatures)
	res.Episodes = 0
	for i, a := range actions {
		t := e.bar[i]
		acc := &e.acc[i]
		traded := abs(e.eng.target(a) - acc.pos)
		dE := e.eng.step(acc, a, t, nil)
		done := t+1 == e.end[i]-1
		if done {
			dE += e.eng.liquidate(acc, t+1, nil)
		}
		rw := e.shape.reward(dE, e.eng.rewardScale(t), traded, e.eng.in.MaxContracts)
		res.Reward[i] = float32(rw)
		res.PnL[i] = dE
		res.Done[i] = done
		res.NextBar[i] = int32(t + 1)
		e.eng.agent(acc, t+1, res.NextAgent[i*market.NumAgentFeatures:(i+1)*market.NumAgentFeatures])
		e.epReward[i] += float64(res.Reward[i])
		if done {
			res.Episodes++
			e.episodes++
			e.reset(i)
		} else {
			e.bar[i] = t + 1
		}
	}
	return nil
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// EpisodeReward is the sum of the rewards env i has earned in its running
// episode.
func (e *VecEnv) EpisodeReward(i int) float64 { return e.epReward[i] }

// EnvState is everything a VecEnv needs to continue exactly: the shape it
// was built with and one value per environment in each slice (N long), as
// flat int64 and float64 slices that a checkpoint stores as I64 and F64
// tensors. Positions are in contracts, prices in price points; Entry, Stop,
// Exit and Held are 0 for a flat env. The random source is not part of it
// (the caller owns and saves it).
type EnvState struct {
	From, To    int64 // the range
	EpisodeBars int64
	Episodes    int64 // EpisodesDone

	Bar      []int64 // current decision bar
	Start    []int64 // window start
	End      []int64 // window end (exclusive)
	Position []int64
	Exit     []int64 // exit rule of the open position
	Held     []int64 // bar closes the open position has been held through
	Entry    []float64
	Stop     []float64
	EpReward []float64 // reward earned in the running episode
}

// State copies the environment's state.
func (e *VecEnv) State() EnvState {
	n := len(e.bar)
	s := EnvState{
		From: int64(e.r.From), To: int64(e.r.To), EpisodeBars: int64(e.episodeBars), Episodes: e.episodes,
		Bar: make([]int64, n), Start: make([]int64, n), End: make([]int64, n),
		Position: make([]int64, n), Exit: make([]int64, n), Held: make([]int64, n),
		Entry: make([]float64, n), Stop: make([]float64, n), EpReward: make([]float64, n),
	}
	for i := range n {
		a := e.acc[i]
		s.Bar[i], s.Start[i], s.End[i] = int64(e.bar[i]), int64(e.start[i]), int64(e.end[i])
		s.Position[i], s.Exit[i], s.Held[i] = int64(a.pos), int64(a.exit), int64(a.held)
		s.Entry[i], s.Stop[i], s.EpReward[i] = a.entry, a.stop, e.epReward[i]
	}
	return s
}

// SetState replaces the environment's state with s, which must come from
// an environment of the same N, range and episode length. It checks every
// value first and changes nothing on error; the error names the field and
// the env.
func (e *VecEnv) SetState(s EnvState) error {
	n := len(e.bar)
	switch {
	case s.From != int64(e.r.From) || s.To != int64(e.r.To):
		return fmt.Errorf("set env state: range [%d, %d), environment has %s", s.From, s.To, e.r)
	case s.EpisodeBars != int64(e.episodeBars):
		return fmt.Errorf("set env state: EpisodeBars %d, environment has %d", s.EpisodeBars, e.episodeBars)
	case s.Episodes < 0:
		return fmt.Errorf("set env state: Episodes %d is negative", s.Episodes)
	}
	ints := []struct {
		name string
		v    []int64
	}{{"Bar", s.Bar}, {"Start", s.Start}, {"End", s.End}, {"Position", s.Position}, {"Exit", s.Exit}, {"Held", s.Held}}
	for _, f := range ints {
		if len(f.v) != n {
			return fmt.Errorf("set env state: %s has %d values, want %d", f.name, len(f.v), n)
		}
	}
	floats := []struct {
		name string
		v    []float64
	}{{"Entry", s.Entry}, {"Stop", s.Stop}, {"EpReward", s.EpReward}}
	for _, f := range floats {
		if len(f.v) != n {
			return fmt.Errorf("set env state: %s has %d values, want %d", f.name, len(f.v), n)
		}
		for i, x := range f.v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("set env state: %s[%d] = %g is not finite", f.name, i, x)
			}
		}
	}
	l := int64(e.windowLen())
	maxPos := int64(e.eng.in.MaxContracts)
	for i := range n {
		start, end, bar := s.Start[i], s.End[i], s.Bar[i]
		switch {
		case start < s.From || end > s.To || end-start != l:
			return fmt.Errorf("set env state: window [Start[%d], End[%d]) = [%d, %d): want %d bars inside [%d, %d)", i, i, start, end, l, s.From, s.To)
		case len(e.segs) > 1 && market.SegmentOf(e.segs, int(start)) != market.SegmentOf(e.segs, int(end-1)):
			return fmt.Errorf("set env state: window [Start[%d], End[%d]) = [%d, %d) crosses from panel series %s into another", i, i, start, end, e.segs[market.SegmentOf(e.segs, int(start))].Name)
		case bar < start || bar > end-2:
			return fmt.Errorf("set env state: Bar[%d] = %d outside the window's decision bars [%d, %d]", i, bar, start, end-2)
		case s.Position[i] < -maxPos || s.Position[i] > maxPos:
			return fmt.Errorf("set env state: Position[%d] = %d beyond ±%d contracts", i, s.Position[i], maxPos)
		case s.Exit[i] < 0 || s.Exit[i] >= market.NumExits:
			return fmt.Errorf("set env state: Exit[%d] = %d out of [0, %d)", i, s.Exit[i], market.NumExits)
		case s.Held[i] < 0 || s.Held[i] > bar-start:
			return fmt.Errorf("set env state: Held[%d] = %d out of [0, %d]", i, s.Held[i], bar-start)
		case s.Position[i] == 0 && (s.Exit[i] != 0 || s.Held[i] != 0 || s.Entry[i] != 0 || s.Stop[i] != 0):
			return fmt.Errorf("set env state: env %d is flat but has Exit %d, Held %d, Entry %g, Stop %g (want zeros)", i, s.Exit[i], s.Held[i], s.Entry[i], s.Stop[i])
		}
	}
	e.episodes = s.Episodes
	for i := range n {
		e.bar[i], e.start[i], e.end[i] = int(s.Bar[i]), int(s.Start[i]), int(s.End[i])
		e.acc[i] = account{pos: int(s.Position[i]), exit: int(s.Exit[i]), held: int(s.Held[i]), entry: s.Entry[i], stop: s.Stop[i]}
		e.epReward[i] = s.EpReward[i]
	}
	return nil
}
