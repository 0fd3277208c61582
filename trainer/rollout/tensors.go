package rollout

import (
	"fmt"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
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

// envInts and envFloats name the per-environment state tensors (shape
// [E]: I64 and F64) and where they live in market.EnvState.
func envInts(s *market.EnvState) map[string]*[]int64 {
	return map[string]*[]int64{"env.bar": &s.Bar, "env.start": &s.Start, "env.end": &s.End,
		"env.position": &s.Position, "env.exit": &s.Exit, "env.held": &s.Held}
}

func envFloats(s *market.EnvState) map[string]*[]float64 {
	return map[string]*[]float64{"env.entry": &s.Entry, "env.stop": &s.Stop, "env.ep_reward": &s.EpReward}
}

var envIntNames = []string{"env.bar", "env.start", "env.end", "env.position", "env.exit", "env.held"}
var envFloatNames = []string{"env.entry", "env.stop", "env.ep_reward"}

// Tensors returns the collector's state as checkpoint tensors, in this
// order: env.meta, env.bar, env.start, env.end, env.position, env.exit,
// env.held, env.entry, env.stop, env.ep_reward, nstep.len, nstep.bar,
// nstep.agent, nstep.action, nstep.reward, trainer.env_steps, rng.env,
// rng.explore. The tensors own their data.
func (c *Collector) Tensors() ([]checkpoint.Tensor, error) {
	es := c.env.State()
	n := len(es.Bar)
	ts := []checkpoint.Tensor{checkpoint.I64Tensor(TensorEnvMeta, []int{4}, []int64{es.From, es.To, es.EpisodeBars, es.Episodes})}
	ints, floats := envInts(&es), envFloats(&es)
	for _, name := range envIntNames {
		ts = append(ts, checkpoint.I64Tensor(name, []int{n}, *ints[name]))
	}
	for _, name := range envFloatNames {
		ts = append(ts, checkpoint.F64Tensor(name, []int{n}, *floats[name]))
	}
	q := c.nstep
	envs, ns := len(q.len), q.n
	lens := make([]int64, envs)
	for i, l := range q.len {
		lens[i] = int64(l)
	}
	ts = append(ts,
		checkpoint.I64Tensor(TensorNStepLen, []int{envs}, lens),
		checkpoint.I32Tensor(TensorNStepBar, []int{envs, ns}, q.bar),
		checkpoint.F32Tensor(TensorNStepAgent, []int{envs, ns, market.NumAgentFeatures}, q.agent),
		checkpoint.I32Tensor(TensorNStepAction, []int{envs, ns, 3}, q.action),
		checkpoint.F32Tensor(TensorNStepReward, []int{envs, ns}, q.reward),
		checkpoint.I64Tensor(TensorEnvSteps, []int{1}, []int64{c.envSteps}),
	)
	for _, r := range []struct {
		name string
		pcg  *rand.PCG
	}{{TensorRNGEnv, c.envPCG}, {TensorRNGExplore, c.explorePCG}} {
		b, err := r.pcg.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", r.name, err)
		}
		ts = append(ts, checkpoint.U8Tensor(r.name, []int{len(b)}, b))
	}
	return ts, nil
}

// Load replaces the collector's state by the tensors of ck that Tensors
// names, written by a collector of the same config and training range;
// other tensors are ignored. It checks every tensor first and changes
// nothing on error; the error names the tensor.
func (c *Collector) Load(ck *checkpoint.Checkpoint) error {
	if ck == nil {
		return fmt.Errorf("load collector: nil checkpoint")
	}
	n := c.env.N()
	em, err := ck.I64(TensorEnvMeta, 4)
	if err != nil {
		return err
	}
	es := market.EnvState{From: em[0], To: em[1], EpisodeBars: em[2], Episodes: em[3]}
	ints, floats := envInts(&es), envFloats(&es)
	for _, name := range envIntNames {
		if *ints[name], err = ck.I64(name, n); err != nil {
			return err
		}
	}
	for _, name := range envFloatNames {
		if *floats[name], err = ck.F64(name, n); err != nil {
			return err
		}
	}
	q, err := c.readNStep(ck)
	if err != nil {
		return err
	}
	steps, err := ck.I64(TensorEnvSteps, 1)
	if err != nil {
		return err
	}
	if steps[0] < 0 {
		return fmt.Errorf("tensor %s: %d is negative", TensorEnvSteps, steps[0])
	}
	var envPCG, explorePCG rand.PCG
	for _, r := range []struct {
		name string
		pcg  *rand.PCG
	}{{TensorRNGEnv, &envPCG}, {TensorRNGExplore, &explorePCG}} {
		tn, ok := ck.Find(r.name)
		if !ok || tn.DType != checkpoint.U8 {
			return fmt.Errorf("tensor %s: missing or not U8", r.name)
		}
		if err := r.pcg.UnmarshalBinary(tn.Data); err != nil {
			return fmt.Errorf("tensor %s: %w", r.name, err)
		}
	}
	if err := c.env.SetState(es); err != nil { // changes nothing on error
		return err
	}
	c.nstep = q
	c.envSteps = steps[0]
	// The environments and the exploration draws hold these pointers.
	*c.envPCG, *c.explorePCG = envPCG, explorePCG
	return nil
}

// readNStep decodes the pending n-step queue of ck for this collector's
// shape.
func (c *Collector) readNStep(ck *checkpoint.Checkpoint) (*nstep, error) {
	cur := c.nstep
	envs, ns := len(cur.len), cur.n
	q := newNStep(envs, ns, cur.gamma)
	lens, err := ck.I64(TensorNStepLen, envs)
	if err != nil {
		return nil, err
	}
	for i, l := range lens {
		if l < 0 || l >= int64(ns) {
			return nil, fmt.Errorf("tensor %s: env %d has %d pending steps, want [0, %d)", TensorNStepLen, i, l, ns)
		}
		q.len[i] = int(l)
	}
	if q.bar, err = ck.I32(TensorNStepBar, envs, ns); err != nil {
		return nil, err
	}
	if q.agent, err = ck.F32(TensorNStepAgent, envs, ns, market.NumAgentFeatures); err != nil {
		return nil, err
	}
	if q.action, err = ck.I32(TensorNStepAction, envs, ns, 3); err != nil {
		return nil, err
	}
	if q.reward, err = ck.F32(TensorNStepReward, envs, ns); err != nil {
		return nil, err
	}
	return q, nil
}
