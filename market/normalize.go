package market

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Normalisation bounds: NormStdFloor keeps a constant feature (volume
// features of a file without volume) from dividing by zero, and NormClip
// bounds a normalised value so one outlier bar cannot dominate a layer's
// input.
const (
	NormStdFloor = 1e-8
	NormClip     = 10
)

// Normalizer standardises features with per-feature statistics of the
// training range: z = clip((x − Mean)/Std, ±NormClip). It is stored with the
// run, so a trained policy sees the same scaling on any other data.
type Normalizer struct {
	Mean [NumFeatures]float64 `json:"mean"`
	Std  [NumFeatures]float64 `json:"std"`
	// Drop has bit j set for each feature j the policy does not see: Apply
	// writes 0 for it (data.drop_features). Stored with the run like the
	// statistics, so a checkpoint's policy sees the same inputs on any
	// data. 0 when every feature is used.
	Drop uint64 `json:"drop,omitempty"`
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

// Apply writes clip((raw − Mean)/Std, ±NormClip) as float32 into dst, for as
// many whole rows as both slices hold. A NaN input becomes 0 (the training
// mean), so a bad value cannot poison the network.
func (n Normalizer) Apply(raw []float64, dst []float32) {
	rows := min(len(raw), len(dst)) / NumFeatures
	for i := 0; i < rows; i++ {
		src := raw[i*NumFeatures : (i+1)*NumFeatures]
		out := dst[i*NumFeatures : (i+1)*NumFeatures]
		for j, x := range src {
			z := (x - n.Mean[j]) / n.Std[j]
			switch {
			case math.IsNaN(z):
				z = 0
			case z > NormClip:
				z = NormClip
			case z < -NormClip:
				z = -NormClip
			}
			out[j] = float32(z)
		}
		for d := n.Drop; d != 0; d &= d - 1 {
			if j := bits.TrailingZeros64(d); j < NumFeatures {
				out[j] = 0
			}
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
