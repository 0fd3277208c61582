package market

import "math"

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
}

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
	}
}
