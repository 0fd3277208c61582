// Package rollout is the host-side experience collector of the CPU
// backend: a vectorised futures environment over the training range,
// epsilon-greedy exploration around the backend's greedy policy, and the
// n-step return queue that turns one-step results into replay transitions.
// It also runs the greedy backtest of any policy given as a Greedy
// function (Backtest). The CUDA backend runs the same collector on the
// device (gpu/kernels/env.cu) and shares what the two must agree on: the
// checkpoint tensors (State), the epsilon schedule (Epsilon) and the
// stream numbers.
//
// A Collector owns two random streams, rand.NewPCG(seed, StreamEnv) for
// episode windows and rand.NewPCG(seed, StreamExplore) for exploration,
// and checkpoints them with the environments and the pending n-step steps
// (Tensors, Load). The backend keeps its own streams (the CPU backend's
// replay sampling stream "rng.sample"). For a config, seed and sequence of
// greedy answers the transitions are bit-identical from run to run, so two
// collectors given the same state and the same actions collect the same
// experience (the CUDA backend's equivalence test relies on it).
package rollout
