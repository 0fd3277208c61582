package sim

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/dqnflow/dqnflow/market"
)

// BatchPolicy decides the actions of many observations in one call: the
// rows observations of obs (rows×ObsDim) into dst[:rows]. The action of a
// row must be a function of that row alone, never of the other rows of the
// call, as a network's greedy action is.
type BatchPolicy interface {
	ActBatch(obs []float32, rows int, dst []market.Action) error
}

// BatchStats says how BacktestBatch reached its actions.
type BatchStats struct {
	Rounds    int // calls of ActBatch
	Evaluated int // rows those calls decided, all rounds together
	Decisions int // decisions the backtest took (a bar-by-bar Backtest's calls)
	// Actions are the actions taken, one per decision from the range's
	// first bar.
	Actions []market.Action
}

// BacktestBatch is Backtest for a policy that decides many observations in
// one call: the same report, from far fewer and far larger calls.
//
// Only the agent features of an observation depend on earlier actions, and
// they are all zero while the account is flat. An open position evolves
// without the policy's help as long as the policy holds it (asks for the
// same position and exit rule): its features at the next bars follow from
// the bars alone. So the backtest decides in rounds:
//
//  0. every decision bar as if the account were flat, in one call;
//  1. every position those flat decisions open, held for a bar: a chain
//     of observations per entry, all chains in one call;
//  2. where a chain's policy stops holding (it reverses, adds, changes its
//     exit rule, or the chain ran out), the position that follows, held
//     for twice as many bars, all such chains in one call; and so on.
//
// After each round the range is walked bar by bar with the exact account:
// at a flat bar the action is the flat decision; at a bar with a position
// it is the decision of a chain whose observation equals the account's,
// bit for bit. The first bar without one is a miss: a chain from the exact
// state there joins the next round, and the next walk resumes at that bar
// (from a saved copy of the walk). A walk without a miss is the backtest.
// Every decision it used was taken on the observation a bar-by-bar
// Backtest makes at that bar, so the report is Backtest's.
//
// Each round resolves at least the bar of its first miss, so the loop
// ends. After maxRounds rounds, or once speculation has decided more than
// maxRowsPerDecision rows per decision bar, the walk finishes in one pass,
// deciding at each miss only the chain that starts there (narrowChain
// bars): a policy that defeats the chains costs at most one call per bar,
// what Backtest costs.
func BacktestBatch(ds *market.Dataset, r market.Range, p BatchPolicy, b *Benchmarks) (Report, BatchStats, error) {
	if p == nil {
		return Report{}, BatchStats{}, fmt.Errorf("backtest: nil policy")
	}
	bp := batchRuns.Get().(*batchRun)
	bp.reset(p)
	rep, err := backtestRun(ds, r, b, func(s *engine) (runRecord, error) { return bp.run(s, r) })
	st := bp.stats
	bp.p, bp.s = nil, nil
	batchRuns.Put(bp)
	return rep, st, err
}

// batchRuns keeps the scratch of finished BacktestBatch calls: a trainer
// backtests every epoch, and a range of 8,000 bars needs megabytes.
var batchRuns = sync.Pool{New: func() any { return new(batchRun) }}

// reset readies b for a backtest of p, keeping its buffers' capacity.
func (b *batchRun) reset(p BatchPolicy) {
	*b = batchRun{p: p, flat: b.flat[:0], dec: b.dec[:0], first: b.first[:0], keys: b.keys[:0], at: b.at[:0],
		crow: b.crow[:0], buf: b.buf[:0], out: b.out[:0], next: b.next[:0], spare: b.spare[:0],
		ckeys: b.ckeys[:0], cheld: b.cheld[:0], off: b.off[:0], cnt: b.cnt[:0]}
}

// Bounds of BacktestBatch's speculation: rounds, first chain length,
// longest chain, rows decided per decision bar of the range, and the chain
// decided at a miss once the rounds are over.
//
// A chain starts one bar long: most entries speculated from the flat
// decisions are never taken (the account holds a position there) or are
// left within a bar or two, and each row asked costs the policy's work.
// Measured on a trained network's greedy policy (CPU backend, 8,000 bars
// of the S&P 500): first chains of 4 bars asked for 34,155 rows in 16
// calls, of 1 bar 19,656 rows in 22 calls, and the backtest took 0.60 s
// instead of 1.03–1.27 s (docs/perf/cpu-2026-12-05-backtest.md). Chains of 1
// reach a length of 4 two rounds later, hence two more rounds than the
// 24 the bound was with chains of 4.
const (
	maxRounds          = 26
	firstChain         = 1
	maxChain           = 512
	maxRowsPerDecision = 16
	narrowChain        = 16
)

// rowKey is one decided observation: the decision bar and the bits of its
// agent features (the bar's own features follow from the bar).
type rowKey struct {
	t    int32
	feat [market.NumAgentFeatures]uint32
}

// chain is a position held from decision bar t for up to n bars; lo and hi
// bound its rows' indices in batchRun.crow once asked for (rows).
type chain struct {
	t      int
	acc    account
	n      int
	lo, hi int32
	held   int32 // index in batchRun.cheld of the account after its first row
}

// decision is the action decided on one bar's observation with the agent
// features feat (their bits); Dir < 0 while the call is pending. next is
// the index of the bar's next decision in batchRun.dec, or −1.
type decision struct {
	feat [market.NumAgentFeatures]uint32
	act  market.Action
	next int32
}

// batchRun is one BacktestBatch.
type batchRun struct {
	p     BatchPolicy
	s     *engine
	r     market.Range
	stats BatchStats
	flat  []market.Action // decision of every bar when flat
	dec   []decision      // the decisions with a position
	first []int32         // per decision bar, its first decision in dec, or −1
	keys  []rowKey        // rows of the next call
	at    []int32         // their index in dec
	crow  []int32         // the rows of this round's chains, indices in dec
	buf   []float32       // their observations
	out   []market.Action // their decisions
	next  []chain         // chains of the next round
	spare []chain         // the buffer of the round before
	taken []market.Action // the walk's actions so far
	feat  [market.NumAgentFeatures]float32
	// A round's chains' rows before they are asked for (chainRows): chain
	// i's are ckeys[off[i] : off[i]+cnt[i]].
	ckeys []rowKey
	cheld []account // the account after each of those rows, held
	off   []int32
	cnt   []int32
	one   [1]chain
}

// sameFeat reports whether two rows' agent features have the same bits,
// word by word, the unrealised P&L first: rows of one bar differ there
// more than anywhere (their positions were entered at other prices), while
// their first words, the position, are mostly the same. Comparing the
// arrays whole calls memequal, 7 % of a backtest's time in its profile.
func sameFeat(a, b *[market.NumAgentFeatures]uint32) bool {
	if a[agentUnrealised] != b[agentUnrealised] {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// lookup returns the decision of row k and whether there is one (its Dir
// is negative while pending).
func (b *batchRun) lookup(k rowKey) (market.Action, bool) {
	for j := b.first[int(k.t)-b.r.From]; j >= 0; j = b.dec[j].next {
		if sameFeat(&b.dec[j].feat, &k.feat) {
			return b.dec[j].act, true
		}
	}
	return market.Action{}, false
}

// ask adds row k to the next call unless it is decided or pending.
// It returns the row's index in dec.
func (b *batchRun) ask(k rowKey) int32 {
	i := int(k.t) - b.r.From
	for j := b.first[i]; j >= 0; j = b.dec[j].next {
		if sameFeat(&b.dec[j].feat, &k.feat) {
			return j
		}
	}
	b.dec = append(b.dec, decision{feat: k.feat, act: market.Action{Dir: -1}, next: b.first[i]})
	b.first[i] = int32(len(b.dec) - 1)
	b.keys = append(b.keys, k)
	b.at = append(b.at, b.first[i])
	return b.first[i]
}

// key is the row of decision bar t with account acc.
func (b *batchRun) key(t int, acc *account) rowKey { return b.s.rowKey(t, acc, &b.feat) }

// rowKey is the row of decision bar t with account acc; feat is scratch.
func (s *engine) rowKey(t int, acc *account, feat *[market.NumAgentFeatures]float32) rowKey {
	s.agent(acc, t, feat[:])
	k := rowKey{t: int32(t)}
	for j, x := range feat {
		k.feat[j] = math.Float32bits(x)
	}
	return k
}

// holdStep is step(acc, a, t, nil) for an action a that holds acc's
// position and exit rule, without the money: a held position trades
// nothing at the open, keeps its stop, may be stopped inside bar t+1 and
// otherwise counts one more bar held.
func (s *engine) holdStep(acc *account, t int) {
	if acc.pos == 0 {
		return
	}
	b := s.ds.Bars
	if acc.exit > 0 && (acc.pos > 0 && b.Low[t+1] <= acc.stop || acc.pos < 0 && b.High[t+1] >= acc.stop) {
		*acc = account{}
		return
	}
	acc.held++
}

// holds reports whether a leaves acc's position and exit rule as they are.
func (b *batchRun) holds(acc *account, a market.Action) bool {
	return b.s.target(a) == acc.pos && a.Exit == acc.exit
}

// rows appends the rows of the chains cur not decided yet to the next
// call, in the chains' order, and sets each chain's lo and hi (its rows'
// indices in crow) for follow.
//
// A chain's rows (its held position's agent features, bar by bar) depend
// on that chain alone, so they are computed first, on several goroutines
// when there are enough of them (parallelRows); asking for them is then
// done here in order, so the call, and everything after it, is the same
// however the work was split.
func (b *batchRun) rows(cur []chain) {
	b.off = slices.Grow(b.off[:0], len(cur)+1)[:len(cur)+1]
	b.cnt = slices.Grow(b.cnt[:0], len(cur))[:len(cur)]
	total := 0
	for i, c := range cur {
		b.off[i] = int32(total)
		total += max(0, min(c.n, b.r.To-1-c.t))
	}
	b.off[len(cur)] = int32(total)
	b.ckeys = slices.Grow(b.ckeys[:0], total)[:total]
	b.cheld = slices.Grow(b.cheld[:0], total)[:total]
	s, to := b.s, b.r.To
	inParts(len(cur), total, func(i int) int { return int(b.off[i]) }, func(lo, hi int) {
		var feat [market.NumAgentFeatures]float32
		for i := lo; i < hi; i++ {
			c := cur[i]
			acc, k := c.acc, b.off[i]
			for t := c.t; t < c.t+c.n && t < to-1 && acc.pos != 0; t++ {
				b.ckeys[k] = s.rowKey(t, &acc, &feat)
				s.holdStep(&acc, t)
				b.cheld[k] = acc
				k++
			}
			b.cnt[i] = k - b.off[i]
		}
	})
	for i := range cur {
		cur[i].held = b.off[i]
		cur[i].lo = int32(len(b.crow))
		for _, k := range b.ckeys[b.off[i] : b.off[i]+b.cnt[i]] {
			b.crow = append(b.crow, b.ask(k))
		}
		cur[i].hi = int32(len(b.crow))
	}
}

// parallelRows is the least work (rows) that rows and decide split over
// goroutines; below it one goroutine is faster than starting more. A
// variable only so that a test can make every round split.
var parallelRows = 4096

// inParts calls f(lo, hi) over consecutive parts of items [0, n) that
// together hold work rows (item i starting at row at(i), at ascending),
// on up to GOMAXPROCS goroutines of about equal rows, and returns when all
// are done. Below parallelRows rows it calls f(0, n) on this goroutine.
func inParts(n, work int, at func(i int) int, f func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), work/max(1, parallelRows/2), n)
	if parts <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	lo := 0
	for p := 1; p <= parts; p++ {
		hi := n
		if p < parts {
			want := work * p / parts
			hi = lo + sort.Search(n-lo, func(j int) bool { return at(lo+j) >= want })
		}
		if from := lo; hi > from {
			wg.Go(func() { f(from, hi) })
		}
		lo = hi
	}
	wg.Wait()
}

// follow walks chain c through its decisions and returns the chain that
// comes after it: where the policy stops holding, the position its action
// leaves (a flat account ends the line); where the chain ran out holding,
// the same position held twice as long.
func (b *batchRun) follow(c chain) (chain, bool) {
	acc := c.acc
	for k, t := c.lo, c.t; t < c.t+c.n; k, t = k+1, t+1 {
		if t >= b.r.To-1 || acc.pos == 0 || k >= c.hi {
			return chain{}, false
		}
		a := b.dec[b.crow[k]].act
		if !b.holds(&acc, a) {
			if a.Dir < 0 || a.Check() != nil {
				return chain{}, false
			}
			b.s.step(&acc, a, t, nil)
			return chain{t: t + 1, acc: acc, n: firstChain}, acc.pos != 0 && t+1 < b.r.To-1
		}
		// An action that holds leaves acc as holdStep does: rows kept it.
		acc = b.cheld[c.held+k-c.lo]
	}
	return chain{t: c.t + c.n, acc: acc, n: min(2*c.n, maxChain)}, acc.pos != 0 && c.t+c.n < b.r.To-1
}

// decide decides the rows gathered in keys in one call.
func (b *batchRun) decide() error {
	n := len(b.keys)
	if n == 0 {
		return nil
	}
	b.buf = slices.Grow(b.buf[:0], n*market.ObsDim)[:n*market.ObsDim]
	b.out = slices.Grow(b.out[:0], n)[:n]
	feats := b.s.ds.Features
	inParts(n, n, func(i int) int { return i }, func(lo, hi int) {
		for i, k := range b.keys[lo:hi] {
			row := b.buf[(lo+i)*market.ObsDim : (lo+i+1)*market.ObsDim]
			copy(row[:market.NumFeatures], feats[int(k.t)*market.NumFeatures:(int(k.t)+1)*market.NumFeatures])
			for j, u := range k.feat {
				row[market.NumFeatures+j] = math.Float32frombits(u)
			}
		}
	})
	b.stats.Rounds++
	b.stats.Evaluated += n
	if err := b.p.ActBatch(b.buf, n, b.out); err != nil {
		return fmt.Errorf("policy, %d bars: %w", n, err)
	}
	for i, j := range b.at {
		b.dec[j].act = b.out[i]
	}
	b.keys, b.at = b.keys[:0], b.at[:0]
	return nil
}

// run walks bars r (BacktestBatch).
func (b *batchRun) run(s *engine, r market.Range) (runRecord, error) {
	b.s, b.r = s, r
	n := r.Len() - 1 // decision bars r.From … r.To−2
	b.flat = slices.Grow(b.flat, n)[:n]
	b.first = slices.Grow(b.first, n)[:n]
	for i := range b.first {
		b.first[i] = -1
	}
	b.buf = slices.Grow(b.buf, n*market.ObsDim)[:n*market.ObsDim]
	for i := range n {
		s.ds.Obs(r.From+i, nil, b.buf[i*market.ObsDim:(i+1)*market.ObsDim])
	}
	// The actions taken leave with the stats (BatchStats.Actions), so they
	// are the call's own, sized once: appended from empty, they were
	// reallocated as they grew, most of the call's allocation.
	b.taken = make([]market.Action, 0, n)
	b.stats.Rounds, b.stats.Evaluated = 1, n
	if err := b.p.ActBatch(b.buf, n, b.flat); err != nil {
		return runRecord{}, fmt.Errorf("policy, %d bars: %w", n, err)
	}
	// Round 1: every position a flat decision opens.
	for i, a := range b.flat {
		t := r.From + i
		if a.Check() != nil || s.target(a) == 0 || t+1 >= r.To-1 {
			continue
		}
		var acc account
		s.step(&acc, a, t, nil)
		if acc.pos != 0 {
			b.next = append(b.next, chain{t: t + 1, acc: acc, n: firstChain})
		}
	}
	w := s.newWalk(r)
	budget := maxRowsPerDecision * n
	for {
		exact := b.stats.Rounds > maxRounds || b.stats.Evaluated > budget // one pass, a chain per miss
		if !exact {
			cur := b.next
			b.next, b.crow = b.spare[:0], b.crow[:0]
			b.rows(cur)
			if err := b.decide(); err != nil {
				return runRecord{}, err
			}
			for _, c := range cur {
				if nc, ok := b.follow(c); ok {
					b.next = append(b.next, nc)
				}
			}
			b.spare = cur[:0]
		}
		var saved walk
		miss := false
		for w.t < r.To-1 {
			if w.pa.ruinBar > 0 {
				w.flat()
				continue
			}
			a := b.flat[w.t-r.From]
			if w.acc.pos != 0 {
				k := b.key(w.t, &w.acc)
				d, ok := b.lookup(k)
				if !ok || d.Dir < 0 {
					if !exact {
						miss, saved = true, *w
						b.next = append(b.next, chain{t: w.t, acc: w.acc, n: firstChain})
						break
					}
					b.crow = b.crow[:0]
					b.one[0] = chain{t: w.t, acc: w.acc, n: narrowChain}
					b.rows(b.one[:])
					if err := b.decide(); err != nil {
						return runRecord{}, err
					}
					d, _ = b.lookup(k)
				}
				a = d
			}
			if err := w.act(a); err != nil {
				return runRecord{}, err
			}
			b.taken = append(b.taken[:w.decisions-1], a)
		}
		if !miss {
			b.stats.Actions = b.taken
			b.stats.Decisions = w.decisions
			return w.record(), nil
		}
		*w = saved
	}
}

// sameBits reports whether a and b (of one length) hold the same values bit
// for bit (−0 is not 0).
func sameBits(a, b []float32) bool {
	for k := range a {
		if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
			return false
		}
	}
	return true
}
