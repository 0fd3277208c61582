package market

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
)

// Panel training: one agent trained on several series at once
// (docs/adr/0037-panel-training.md).
//
// JoinPanel lays the training ranges of several prepared Datasets (each
// with its own normaliser, instrument and costs, as Prepare makes
// it) end to end in one training Dataset, so that the collector, the
// replay buffer and both backends' environments run on it unchanged. Two
// things make the one Instrument of the joined set valid for every part:
//
//   - Prices. Part k's prices (open, high, low, close) and its ATR are
//     multiplied by s_k = PV_k/PV_0, its contract's point value over the
//     first part's. One contract of the joined set (point value PV_0)
//     then gains PV_0·s_k·ΔP = PV_k·ΔP money on a move of ΔP of part k:
//     exactly what part k's own contract gains, so rewards (P&L over
//     ATR·PV·MaxContracts) and the money of every step are part k's own.
//     The sizing rule sized every PV_k for the same capital at the part's
//     reference price, so the scaled prices of all parts start near one
//     level.
//   - Costs. Part k's slippage of one fill at bar t (its Dataset.Slip or
//     its instrument's constant, in price points) plus its commission in
//     price points (comm(open_t)/PV_k), both at the bar's open and scaled
//     by s_k, become the joined set's per-bar Slip; the joined instrument
//     charges no commission and no constant slippage of its own. A fill
//     of q contracts then costs |q|·(slip_k·PV_k + comm_k) money, part
//     k's own cost. Two approximations: a "bps" cost is priced at the
//     bar's open even for a stop or the end-of-window close inside or at
//     the end of the bar, and the commission, now part of the slippage,
//     also moves the fill price that the position's entry and stop are
//     measured from (by the commission in points, a fraction of a tick
//     for the presets).
//
// The features are each part's own normalised rows (its own normaliser,
// fitted on its own training range), copied. The ATR floor of part k
// (its tick size) is applied before scaling, and the joined tick size is
// the smallest scaled tick, so the joined ATR floor never binds where
// part k's would not.
//
// Segments. The joined training range is split into one Segment per
// part. An episode window never crosses a segment boundary
// (sim.WindowStart): a window that began in one series and ended in another
// would see a price jump no market made. Every part's training range must
// hold at least episodeBars bars; a shorter one is an error naming the
// series (rather than a clipped window, which would make episode lengths
// differ and the environments' windows unequal in length, which
// sim.EnvState's checks and the device's window arithmetic rely on).

// Segment is the training bars [From, To) of one series of a panel
// (Dataset.Segments), with the relative probability Weight that a new
// episode window is drawn in it.
type Segment struct {
	Name     string  `json:"name"`
	From, To int     `json:"-"`
	Weight   float64 `json:"weight"`
}

// Len is the number of bars of the segment.
func (s Segment) Len() int { return s.To - s.From }

// JoinPanel joins the training ranges of parts (their TrainingSet's, so a
// part may be mirrored) into one training Dataset as the file's comment
// describes, with one Segment per part, named names[k] (the part's
// Bars.Name when names is nil), weighted by weighting ("equal", the
// default when "", or "bars"). Its Train is every joined bar, its Valid
// and Test are empty (a panel validates on each part's own Valid range),
// its Norm and BarsPerYear are the first part's. The parts must share
// MaxContracts and InitialCapital (one config prepared them) and each
// must train on at least episodeBars bars.
func JoinPanel(names []string, parts []*Dataset, weighting string, episodeBars int) (*Dataset, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("join panel: no series")
	}
	if names != nil && len(names) != len(parts) {
		return nil, fmt.Errorf("join panel: %d names for %d series", len(names), len(parts))
	}
	if weighting == "" {
		weighting = config.WeightingEqual
	}
	if weighting != config.WeightingEqual && weighting != config.WeightingBars {
		return nil, fmt.Errorf("join panel: weighting %q: want %q or %q", weighting, config.WeightingEqual, config.WeightingBars)
	}
	name := func(k int) string {
		if names != nil {
			return names[k]
		}
		if parts[k] != nil && parts[k].Bars != nil {
			return parts[k].Bars.Name
		}
		return fmt.Sprintf("series %d", k)
	}
	ref := parts[0]
	if ref == nil || ref.Bars == nil {
		return nil, fmt.Errorf("join panel: series %s has no bars", name(0))
	}
	in0 := ref.Instrument
	total := 0
	for k, p := range parts {
		if p == nil || p.Bars == nil {
			return nil, fmt.Errorf("join panel: series %s has no bars", name(k))
		}
		ts := p.TrainingSet()
		in := p.Instrument
		switch {
		case len(ts.Segments) > 1:
			return nil, fmt.Errorf("join panel: series %s is a panel itself", name(k))
		case ts.Train.Len() < episodeBars || ts.Train.Len() < 2:
			return nil, fmt.Errorf("join panel: series %s trains on %d bars %s, fewer than env.episode_bars %d: an episode window must fit in one series",
				name(k), ts.Train.Len(), ts.Train, episodeBars)
		case ts.Train.From < 0 || ts.Train.To > ts.Bars.Len():
			return nil, fmt.Errorf("join panel: series %s: training range %s outside its %d bars", name(k), ts.Train, ts.Bars.Len())
		case !(in.PointValue > 0) || math.IsInf(in.PointValue, 0):
			return nil, fmt.Errorf("join panel: series %s: instrument point value %g must be positive and finite", name(k), in.PointValue)
		case in.MaxContracts != in0.MaxContracts || in.InitialCapital != in0.InitialCapital:
			return nil, fmt.Errorf("join panel: series %s trades %d contracts on capital %g, series %s %d on %g: a panel needs one env.max_contracts and env.initial_capital",
				name(k), in.MaxContracts, in.InitialCapital, name(0), in0.MaxContracts, in0.InitialCapital)
		case len(ts.Features) != ts.Bars.Len()*NumFeatures || len(ts.ATR) != ts.Bars.Len() || (ts.Slip != nil && len(ts.Slip) != ts.Bars.Len()):
			return nil, fmt.Errorf("join panel: series %s: features, ATR or per-bar slippage do not match its %d bars", name(k), ts.Bars.Len())
		}
		total += ts.Train.Len()
	}

	var names2 []string
	b := &prices.Bars{
		Time: make([]time.Time, total), Open: make([]float64, total), High: make([]float64, total),
		Low: make([]float64, total), Close: make([]float64, total), Volume: make([]float64, total), HasVolume: true,
	}
	out := &Dataset{
		Bars: b, Features: make([]float32, total*NumFeatures), Norm: ref.Norm, ATR: make([]float64, total),
		Train: Range{0, total}, Valid: Range{total, total}, Test: Range{total, total},
		Slip: make([]float64, total), BarsPerYear: ref.BarsPerYear,
	}
	tick := math.Inf(1)
	off := 0
	for k, p := range parts {
		ts := p.TrainingSet()
		in := p.Instrument
		src, r := ts.Bars, ts.Train
		sc := in.PointValue / in0.PointValue
		names2 = append(names2, name(k))
		b.HasVolume = b.HasVolume && src.HasVolume
		for i := range r.Len() {
			t, j := r.From+i, off+i
			o := src.Open[t]
			b.Time[j], b.Volume[j] = src.Time[t], src.Volume[t]
			b.Open[j], b.High[j], b.Low[j], b.Close[j] = o*sc, src.High[t]*sc, src.Low[t]*sc, src.Close[t]*sc
			out.ATR[j] = max(ts.ATR[t], in.TickSize) * sc
			slip := in.Slip(o)
			if ts.Slip != nil {
				slip = ts.Slip[t]
			}
			out.Slip[j] = (slip + in.Comm(o)/in.PointValue) * sc
		}
		copy(out.Features[off*NumFeatures:], ts.Features[r.From*NumFeatures:r.To*NumFeatures])
		w := 1.0
		if weighting == config.WeightingBars {
			w = float64(r.Len())
		}
		out.Segments = append(out.Segments, Segment{Name: name(k), From: off, To: off + r.Len(), Weight: w})
		if in.TickSize > 0 {
			tick = min(tick, in.TickSize*sc)
		}
		off += r.Len()
	}
	b.Name = "panel of " + strings.Join(names2, ", ")
	in := in0
	in.Name = "panel"
	in.SlippageTicks, in.SlippageBps, in.Commission, in.CommissionBps, in.CommissionPoints = 0, 0, 0, 0, 0
	if !math.IsInf(tick, 0) {
		in.TickSize = tick
	}
	out.Instrument = in
	if err := in.Check(); err != nil {
		return nil, fmt.Errorf("join panel: %w", err)
	}
	for t, x := range out.Slip {
		if !(x >= 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("join panel: joined bar %d: cost %g per fill is not finite and non-negative", t, x)
		}
	}
	return out, nil
}

// SegmentCumulative is the cumulative share of the segments' weights,
// c_k = Σ_{j≤k} w_j / Σ_j w_j, with the last exactly 1: a uniform u in
// [0, 1) picks the first segment k with u < c_k. The device's window
// draws read this table (gpu/env.go), so both sides pick alike.
func SegmentCumulative(segs []Segment) []float64 {
	c := make([]float64, len(segs))
	var sum float64
	for _, s := range segs {
		sum += s.Weight
	}
	var acc float64
	for k, s := range segs {
		acc += s.Weight
		c[k] = acc / sum
	}
	if len(c) > 0 {
		c[len(c)-1] = 1
	}
	return c
}

// SegmentOf is the index of the segment of segs holding bar t, -1 when
// none does.
func SegmentOf(segs []Segment, t int) int {
	for k, s := range segs {
		if t >= s.From && t < s.To {
			return k
		}
	}
	return -1
}
