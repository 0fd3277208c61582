package rollout

import (
	"fmt"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// Checkpoint tensors of a Collector (docs/checkpoint-format.md), with
// E = env.num_envs and n = optim.n_step.
const (
	TensorEnvSteps    = "trainer.env_steps" // I64 [1]
	TensorEnvMeta     = "env.meta"          // I64 [4]: range from, range to, episode bars, episodes done
	TensorRNGEnv      = "rng.env"           // U8: PCG state (math/rand/v2 MarshalBinary)
	TensorRNGExplore  = "rng.explore"       // U8: likewise
	TensorNStepLen    = "nstep.len"         // I64 [E]
	TensorNStepBar    = "nstep.bar"         // I32 [E, n]
	TensorNStepAgent  = "nstep.agent"       // F32 [E, n, 8]
	TensorNStepAction = "nstep.action"      // I32 [E, n, 3]
	TensorNStepReward = "nstep.reward"      // F32 [E, n]
)

// State is a collector's state in plain slices, as its checkpoint tensors
// hold it: the environments, the pending n-step steps (E environments of
// at most N−1 steps each, oldest first at [i·N, i·N+Len[i])), the
// environment steps taken and the two random streams' states. A backend
// that runs the collector elsewhere (the CUDA backend's device collector)
// writes and reads the same tensors through it.
type State struct {
	Env      sim.EnvState
	N        int       // optim.n_step
	Len      []int64   // [E]
	Bar      []int32   // [E·N]
	Agent    []float32 // [E·N·NumAgentFeatures]
	Action   []int32   // [E·N·3]
	Reward   []float32 // [E·N]
	EnvSteps int64
	// RNGEnv and RNGExplore are the streams' states, math/rand/v2 PCG
	// MarshalBinary.
	RNGEnv, RNGExplore []byte
}

// envInts and envFloats name the per-environment state tensors (shape
// [E]: I64 and F64) and where they live in sim.EnvState.
func envInts(s *sim.EnvState) map[string]*[]int64 {
	return map[string]*[]int64{"env.bar": &s.Bar, "env.start": &s.Start, "env.end": &s.End,
		"env.position": &s.Position, "env.exit": &s.Exit, "env.held": &s.Held}
}

func envFloats(s *sim.EnvState) map[string]*[]float64 {
	return map[string]*[]float64{"env.entry": &s.Entry, "env.stop": &s.Stop, "env.ep_reward": &s.EpReward}
}

var envIntNames = []string{"env.bar", "env.start", "env.end", "env.position", "env.exit", "env.held"}
var envFloatNames = []string{"env.entry", "env.stop", "env.ep_reward"}

// Tensors returns s as checkpoint tensors, in this order: env.meta,
// env.bar, env.start, env.end, env.position, env.exit, env.held,
// env.entry, env.stop, env.ep_reward, nstep.len, nstep.bar, nstep.agent,
// nstep.action, nstep.reward, trainer.env_steps, rng.env, rng.explore.
// The tensors own their data.
func (s *State) Tensors() []checkpoint.Tensor {
	es := s.Env
	n := len(es.Bar)
	ts := []checkpoint.Tensor{checkpoint.I64Tensor(TensorEnvMeta, []int{4}, []int64{es.From, es.To, es.EpisodeBars, es.Episodes})}
	ints, floats := envInts(&es), envFloats(&es)
	for _, name := range envIntNames {
		ts = append(ts, checkpoint.I64Tensor(name, []int{n}, *ints[name]))
	}
	for _, name := range envFloatNames {
		ts = append(ts, checkpoint.F64Tensor(name, []int{n}, *floats[name]))
	}
	envs, ns := len(s.Len), s.N
	return append(ts,
		checkpoint.I64Tensor(TensorNStepLen, []int{envs}, s.Len),
		checkpoint.I32Tensor(TensorNStepBar, []int{envs, ns}, s.Bar),
		checkpoint.F32Tensor(TensorNStepAgent, []int{envs, ns, market.NumAgentFeatures}, s.Agent),
		checkpoint.I32Tensor(TensorNStepAction, []int{envs, ns, 3}, s.Action),
		checkpoint.F32Tensor(TensorNStepReward, []int{envs, ns}, s.Reward),
		checkpoint.I64Tensor(TensorEnvSteps, []int{1}, []int64{s.EnvSteps}),
		checkpoint.U8Tensor(TensorRNGEnv, []int{len(s.RNGEnv)}, s.RNGEnv),
		checkpoint.U8Tensor(TensorRNGExplore, []int{len(s.RNGExplore)}, s.RNGExplore),
	)
}

// ReadState decodes the collector tensors of ck (Tensors) for envs
// environments and n-step n. It checks shapes, the pending counts and the
// step count, and names the tensor on error; the environments' values are
// checked by sim.VecEnv.SetState, the streams by the backend that
// unmarshals them.
func ReadState(ck *checkpoint.Checkpoint, envs, n int) (State, error) {
	s := State{N: n}
	if ck == nil {
		return s, fmt.Errorf("load collector: nil checkpoint")
	}
	em, err := ck.I64(TensorEnvMeta, 4)
	if err != nil {
		return s, err
	}
	s.Env = sim.EnvState{From: em[0], To: em[1], EpisodeBars: em[2], Episodes: em[3]}
	ints, floats := envInts(&s.Env), envFloats(&s.Env)
	for _, name := range envIntNames {
		if *ints[name], err = ck.I64(name, envs); err != nil {
			return s, err
		}
	}
	for _, name := range envFloatNames {
		if *floats[name], err = ck.F64(name, envs); err != nil {
			return s, err
		}
	}
	if s.Len, err = ck.I64(TensorNStepLen, envs); err != nil {
		return s, err
	}
	for i, l := range s.Len {
		if l < 0 || l >= int64(n) {
			return s, fmt.Errorf("tensor %s: env %d has %d pending steps, want [0, %d)", TensorNStepLen, i, l, n)
		}
	}
	if s.Bar, err = ck.I32(TensorNStepBar, envs, n); err != nil {
		return s, err
	}
	if s.Agent, err = ck.F32(TensorNStepAgent, envs, n, market.NumAgentFeatures); err != nil {
		return s, err
	}
	if s.Action, err = ck.I32(TensorNStepAction, envs, n, 3); err != nil {
		return s, err
	}
	if s.Reward, err = ck.F32(TensorNStepReward, envs, n); err != nil {
		return s, err
	}
	steps, err := ck.I64(TensorEnvSteps, 1)
	if err != nil {
		return s, err
	}
	if steps[0] < 0 {
		return s, fmt.Errorf("tensor %s: %d is negative", TensorEnvSteps, steps[0])
	}
	s.EnvSteps = steps[0]
	for _, r := range []struct {
		name string
		dst  *[]byte
	}{{TensorRNGEnv, &s.RNGEnv}, {TensorRNGExplore, &s.RNGExplore}} {
		tn, ok := ck.Find(r.name)
		if !ok || tn.DType != checkpoint.U8 {
			return s, fmt.Errorf("tensor %s: missing or not U8", r.name)
		}
		*r.dst = tn.Data
	}
	return s, nil
}

// Tensors returns the collector's state as checkpoint tensors (State.Tensors).
func (c *Collector) Tensors() ([]checkpoint.Tensor, error) {
	q := c.nstep
	s := State{Env: c.env.State(), N: q.n, Len: make([]int64, len(q.len)), EnvSteps: c.envSteps,
		Bar:    append([]int32(nil), q.bar...),
		Agent:  append([]float32(nil), q.agent...),
		Action: append([]int32(nil), q.action...),
		Reward: append([]float32(nil), q.reward...),
	}
	for i, l := range q.len {
		s.Len[i] = int64(l)
	}
	for _, r := range []struct {
		name string
		pcg  *rand.PCG
		dst  *[]byte
	}{{TensorRNGEnv, c.envPCG, &s.RNGEnv}, {TensorRNGExplore, c.explorePCG, &s.RNGExplore}} {
		b, err := r.pcg.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", r.name, err)
		}
		*r.dst = b
	}
	return s.Tensors(), nil
}

// Load replaces the collector's state by the tensors of ck that Tensors
// names, written by a collector of the same config and training range;
// other tensors are ignored. It checks every tensor first and changes
// nothing on error; the error names the tensor.
func (c *Collector) Load(ck *checkpoint.Checkpoint) error {
	cur := c.nstep
	s, err := ReadState(ck, c.env.N(), cur.n)
	if err != nil {
		return err
	}
	var envPCG, explorePCG rand.PCG
	for _, r := range []struct {
		name string
		data []byte
		pcg  *rand.PCG
	}{{TensorRNGEnv, s.RNGEnv, &envPCG}, {TensorRNGExplore, s.RNGExplore, &explorePCG}} {
		if err := r.pcg.UnmarshalBinary(r.data); err != nil {
			return fmt.Errorf("tensor %s: %w", r.name, err)
		}
	}
	if err := c.env.SetState(s.Env); err != nil { // changes nothing on error
		return err
	}
	q := newNStep(len(cur.len), cur.n, cur.gamma)
	for i, l := range s.Len {
		q.len[i] = int(l)
	}
	q.bar, q.agent, q.action, q.reward = s.Bar, s.Agent, s.Action, s.Reward
	c.nstep = q
	c.envSteps = s.EnvSteps
	// The environments and the exploration draws hold these pointers.
	*c.envPCG, *c.explorePCG = envPCG, explorePCG
	return nil
}
