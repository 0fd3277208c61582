package market

import (
	"fmt"
	"time"

	"github.com/dqnflow/dqnflow/prices"
)

// Mirrored training (data.mirror).
//
// A policy trained on one range can learn that range's drift: long because
// the training years rose, or short because they fell. With data.mirror the
// collector plays the training range followed by its mirror image, a copy
// whose prices are reflected in log space, so every rise of the original
// is a fall of the copy and the two drifts cancel. What a policy can still
// learn is what does not depend on the sign of the trend.
//
// The copy of training bars From..To−1 (L = To−From bars) is appended
// after bar To−1. With K = C_{To−1}·C_From, copy bar k (k = 0..L−1, of
// original bar s = From+k) is
//
//	O' = K/O_s   H' = K/L_s   L' = K/H_s   C' = K/C_s   V' = V_s
//
// so ln C' = ln K − ln C_s: every log return of the copy is the original's
// negated, every bar's range is kept in log terms, and the copy starts at
// C' = C_{To−1}, the price where the original training range ends. The
// joined series is one continuous price path (there, then back again), so
// the features of the copy are computed by the same causal ComputeFeatures
// over the joined bars and a window that crosses the join sees an ordinary
// reversal, not a jump. Copy bar k is timed at bar s's time plus a whole
// number of weeks (the first that puts it after bar To−1), so the hour and
// weekday features match the original bar's.
//
// Only training sees the copy: the validation and test ranges, the
// backtests and the instrument are the original's. The train-mode
// normaliser is fitted on the joined training range (original and copy),
// which keeps the normalised returns centred where the two drifts cancel.
// A causal normaliser runs over the joined bars like any series: the copy
// is scaled by the statistics of the original and of the copy's earlier
// bars, and the rows before the join are the original's, bit for bit.

// week is the step by which the copy's times are shifted.
const week = 7 * 24 * time.Hour

// mirrorTraining returns bars 0..r.To−1 of b followed by the mirror copy
// of bars r (see above), and the joined training range [r.From, r.To+r.Len()).
func mirrorTraining(b *prices.Bars, r Range) (*prices.Bars, Range, error) {
	if r.From < 0 || r.To > b.Len() || r.Len() < 2 {
		return nil, Range{}, fmt.Errorf("mirror training range %s of %d bars: need at least 2 bars inside the data", r, b.Len())
	}
	n, l := r.To, r.Len()
	k := b.Close[r.To-1] * b.Close[r.From]
	span := b.Time[r.To-1].Sub(b.Time[r.From])
	shift := (span/week + 1) * week
	m := &prices.Bars{
		Name:      b.Name + " (training range mirrored)",
		Time:      make([]time.Time, n+l),
		Open:      make([]float64, n+l),
		High:      make([]float64, n+l),
		Low:       make([]float64, n+l),
		Close:     make([]float64, n+l),
		Volume:    make([]float64, n+l),
		HasVolume: b.HasVolume,
	}
	copy(m.Time, b.Time[:n])
	copy(m.Open, b.Open[:n])
	copy(m.High, b.High[:n])
	copy(m.Low, b.Low[:n])
	copy(m.Close, b.Close[:n])
	copy(m.Volume, b.Volume[:n])
	for i := range l {
		s, j := r.From+i, n+i
		m.Time[j] = b.Time[s].Add(shift)
		m.Open[j], m.High[j], m.Low[j], m.Close[j] = k/b.Open[s], k/b.Low[s], k/b.High[s], k/b.Close[s]
		m.Volume[j] = b.Volume[s]
	}
	return m, Range{From: r.From, To: n + l}, nil
}

// TrainingSet is the dataset the collector plays and the replay buffer's
// bar indices refer to: ds itself, or with data.mirror the joined bars of
// mirrorTraining, whose Train is the joined range. Its rows before
// ds.Train.To are ds's own, so a bar index below that means the same bar
// in both.
func (d *Dataset) TrainingSet() *Dataset {
	if d.training != nil {
		return d.training
	}
	return d
}

// Mirrored reports whether training plays a mirrored copy of the training
// range as well (data.mirror).
func (d *Dataset) Mirrored() bool { return d.training != nil }

// withMirror returns the run's dataset (b's bars normalised with norm)
// with its TrainingSet set to the joined bars. A train-mode norm is
// first fitted on the training range joined with its mirror copy (keeping
// its Drop); a causal one is used as it is.
func withMirror(b *prices.Bars, raw []float64, warmup int, train Range, norm Normalizer) (*Dataset, error) {
	mb, joined, err := mirrorTraining(b, train)
	if err != nil {
		return nil, err
	}
	mraw, _ := ComputeFeatures(mb)
	if !norm.Causal() {
		drop := norm.Drop
		norm = FitNormalizer(mraw, joined)
		norm.Drop = drop
	}
	ds := build(b, raw, warmup, norm)
	ts := build(mb, mraw, warmup, norm)
	ts.Train = joined
	ds.training = ts
	return ds, nil
}
