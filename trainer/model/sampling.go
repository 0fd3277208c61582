package model

// Names every backend shares for the state a trainer keeps beside the
// learner and the collector: the replay buffer's tensors carry ReplayPrefix
// before the replay package's names, and the replay-sampling random stream
// rand.NewPCG(seed, StreamSample) is saved as TensorRNGSample (its
// MarshalBinary state), so a checkpoint of one backend restores on another.
const (
	ReplayPrefix    = "replay."
	TensorRNGSample = "rng.sample"
	StreamSample    = 0x736d70 // "smp"
)
