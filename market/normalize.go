package market

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/dqnflow/dqnflow/config"
)

// Normalisation bounds: NormStdFloor keeps a constant feature (volume
// features of a file without volume) from dividing by zero, and NormClip
// bounds a normalised value so one outlier bar cannot dominate a layer's
// input.
const (
	NormStdFloor = 1e-8
	NormClip     = 10
)

// Normalizer standardises features. It has two modes (data.normalize,
// ADR 0039):
//
//   - Mode "" (data.normalize "train", and every checkpoint written before
//     the causal mode existed): z = clip((x − Mean)/Std, ±NormClip) with
//     per-feature statistics of the training range (FitNormalizer). Inside
//     that range a feature at bar t is scaled by statistics of later bars.
//   - Mode "causal" (CausalNormalizer): each bar is scaled by
//     exponentially weighted statistics of the same series' earlier bars
//     only (Apply gives the formula), so nothing after bar t moves the
//     feature at t. Mean and Std are unused and zero.
//
// It is stored with the run, so a trained policy sees the same scaling
// (the same statistics, or the same causal rule) on any other data.
type Normalizer struct {
	Mean [NumFeatures]float64 `json:"mean"`
	Std  [NumFeatures]float64 `json:"std"`
	// Drop has bit j set for each feature j the policy does not see: Apply
	// writes 0 for it (data.drop_features). Stored with the run like the
	// statistics, so a checkpoint's policy sees the same inputs on any
	// data. 0 when every feature is used.
	Drop uint64 `json:"drop,omitempty"`
	// Mode is "" (statistics of the training range) or
	// config.NormalizeCausal. Omitted when "", so the JSON of a train-mode
	// normaliser is what it was before the causal mode existed.
	Mode string `json:"mode,omitempty"`
	// HalfLife is the causal mode's half-life in bars
	// (data.normalize_half_life); 0 in train mode.
	HalfLife int `json:"half_life,omitempty"`
	// BurnIn is how many rows after the feature warmup the causal mode
	// only seeds its statistics with (CausalBurnIn when it was made):
	// they are written as 0 and belong to no range, so Dataset.Warmup is
	// FeatureWarmup + BurnIn. 0 in train mode.
	BurnIn int `json:"burn_in,omitempty"`
}

// CausalBurnIn is the burn-in of a causal normaliser: the rows after the
// feature warmup whose statistics are not yet trusted. 500 bars are about
// 2.5 windows of the slowest features (168 and 200 bars), whatever the
// half-life: early on the weights are nearly equal (λ^500 ≈ 0.84 at the
// default half-life of 2000), so the seed is close to the plain mean and
// standard deviation of those bars (ADR 0039).
const CausalBurnIn = 500

// CausalNormalizer is the causal normaliser with half-life halfLife bars
// and burn-in CausalBurnIn (data.normalize "causal").
func CausalNormalizer(halfLife int) Normalizer {
	return Normalizer{Mode: config.NormalizeCausal, HalfLife: halfLife, BurnIn: CausalBurnIn}
}

// Causal reports whether n is a causal normaliser.
func (n Normalizer) Causal() bool { return n.Mode == config.NormalizeCausal }

// Check reports a normaliser that Apply cannot use as stored: an unknown
// mode, a causal one without a positive half-life and burn-in, a train-mode
// one with either, or Drop bits beyond the features.
func (n Normalizer) Check() error {
	switch {
	case n.Mode != "" && !n.Causal():
		return fmt.Errorf("normaliser mode %q: want \"\" (training-range statistics) or %q", n.Mode, config.NormalizeCausal)
	case n.Causal() && (n.HalfLife < 1 || n.BurnIn < 1):
		return fmt.Errorf("causal normaliser with half-life %d and burn-in %d: both must be at least 1", n.HalfLife, n.BurnIn)
	case !n.Causal() && (n.HalfLife != 0 || n.BurnIn != 0):
		return fmt.Errorf("training-range normaliser with half-life %d and burn-in %d: both must be 0", n.HalfLife, n.BurnIn)
	case n.Drop>>NumFeatures != 0:
		return fmt.Errorf("normaliser drop %#x names features beyond the %d there are", n.Drop, NumFeatures)
	}
	return nil
}

// NumFeatures must fit the bits of Normalizer.Drop.
var _ [64 - NumFeatures]struct{}

// FitNormalizer computes the mean and the population standard deviation
// (two passes: mean, then Σ(x−mean)²/n) of every feature over the rows of r
// only, so no statistic of the validation range leaks into training. raw is
// row-major with NumFeatures values per row (ComputeFeatures). r is clipped to
// the rows raw holds; an empty range gives Mean 0 and Std 1 (the identity).
// Std is at least NormStdFloor.
func FitNormalizer(raw []float64, r Range) Normalizer {
	var n Normalizer
	rows := len(raw) / NumFeatures
	from, to := max(r.From, 0), min(r.To, rows)
	if to <= from {
		for j := range n.Std {
			n.Std[j] = 1
		}
		return n
	}
	count := float64(to - from)
	for i := from; i < to; i++ {
		row := raw[i*NumFeatures : (i+1)*NumFeatures]
		for j, x := range row {
			n.Mean[j] += x
		}
	}
	for j := range n.Mean {
		n.Mean[j] /= count
	}
	var ss [NumFeatures]float64
	for i := from; i < to; i++ {
		row := raw[i*NumFeatures : (i+1)*NumFeatures]
		for j, x := range row {
			d := x - n.Mean[j]
			ss[j] += d * d
		}
	}
	for j := range n.Std {
		n.Std[j] = max(math.Sqrt(ss[j]/count), NormStdFloor)
	}
	return n
}

// Apply writes the normalised features of raw as float32 into dst, for as
// many whole rows as both slices hold, and 0 for every feature Drop marks.
//
// Train mode: z = clip((x − Mean)/Std, ±NormClip); a NaN input becomes 0
// (the training mean), so a bad value cannot poison the network.
//
// Causal mode: raw must be one series in time order whose row 0 is its
// first defined row (the feature warmup). With λ = 2^(−1/HalfLife) and,
// per feature, the weights λ^(t−1−i) of the rows i < t,
//
//	W_t = Σ_{i<t} λ^(t−1−i),   m_t = Σ w_i x_i / W_t,   v_t = Σ w_i (x_i − m_t)² / W_t,
//
// row t (t ≥ BurnIn) is clip((x_t − m_t)/max(√v_t, NormStdFloor), ±NormClip):
// the statistics of the rows before t only, so an outlier is measured
// against what came before it and is not damped by itself. Rows t < BurnIn
// are 0. The sums are updated bar by bar (West 1979, weighted form: every
// old weight times λ, then the new row with weight 1),
//
//	W ← λW + 1,   d = x − m,   m ← m + d/W,   S ← λS + d·(x − m),   v = S/W,
//
// O(rows·features) in float64; each product is rounded before the add
// (explicit conversions, which forbid fused multiply-adds), so the result
// is the same, bit for bit, on every platform. A NaN or infinite x is left
// out of the statistics (its row's z follows the train-mode rule: NaN 0,
// ±Inf clipped); a feature with no finite row yet gives 0.
func (n Normalizer) Apply(raw []float64, dst []float32) {
	if n.Causal() {
		n.applyCausal(raw, dst)
		return
	}
	rows := min(len(raw), len(dst)) / NumFeatures
	for i := 0; i < rows; i++ {
		src := raw[i*NumFeatures : (i+1)*NumFeatures]
		out := dst[i*NumFeatures : (i+1)*NumFeatures]
		for j, x := range src {
			out[j] = clipZ((x - n.Mean[j]) / n.Std[j])
		}
		n.drop(out)
	}
}

// applyCausal is Apply in causal mode.
func (n Normalizer) applyCausal(raw []float64, dst []float32) {
	rows := min(len(raw), len(dst)) / NumFeatures
	lambda := math.Exp2(-1 / float64(n.HalfLife))
	var w, mean, ss [NumFeatures]float64
	for i := 0; i < rows; i++ {
		src := raw[i*NumFeatures : (i+1)*NumFeatures]
		out := dst[i*NumFeatures : (i+1)*NumFeatures]
		for j, x := range src {
			out[j] = 0
			if i >= n.BurnIn && w[j] > 0 {
				out[j] = clipZ((x - mean[j]) / max(math.Sqrt(ss[j]/w[j]), NormStdFloor))
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			w[j] = float64(lambda*w[j]) + 1
			d := x - mean[j]
			mean[j] += d / w[j]
			ss[j] = float64(lambda*ss[j]) + float64(d*(x-mean[j]))
		}
		n.drop(out)
	}
}

// clipZ is z clipped to ±NormClip as float32, 0 for NaN.
func clipZ(z float64) float32 {
	switch {
	case math.IsNaN(z):
		z = 0
	case z > NormClip:
		z = NormClip
	case z < -NormClip:
		z = -NormClip
	}
	return float32(z)
}

// drop zeroes the features of one row that Drop marks.
func (n Normalizer) drop(out []float32) {
	for d := n.Drop; d != 0; d &= d - 1 {
		if j := bits.TrailingZeros64(d); j < NumFeatures {
			out[j] = 0
		}
	}
}

// DropFeatures resolves a comma-separated list of feature names
// (FeatureNames; spaces around a name are ignored) to the bits of
// Normalizer.Drop; 0 for "". An unknown, empty or repeated name is an
// error naming its position in the list.
func DropFeatures(list string) (uint64, error) {
	if strings.TrimSpace(list) == "" {
		return 0, nil
	}
	names := strings.Split(list, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	index := make(map[string]int, NumFeatures)
	for j, n := range FeatureNames {
		index[n] = j
	}
	var out uint64
	for i, n := range names {
		j, ok := index[n]
		switch {
		case !ok:
			return 0, fmt.Errorf("name %d, %q, is not a feature; the features are %s", i+1, n, strings.Join(FeatureNames[:], ", "))
		case out&(1<<j) != 0:
			return 0, fmt.Errorf("name %d, %q, is named twice", i+1, n)
		}
		out |= 1 << j
	}
	if bits.OnesCount64(out) == NumFeatures {
		return 0, fmt.Errorf("drops all %d features; the policy would see only its own position", NumFeatures)
	}
	return out, nil
}
