package rollout

import (
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/replay"
)

// nstep turns each environment's one-step transitions into n-step ones
// (Sutton & Barto §7.1): the transition from state s_k holds
//
//	R = Σ_{j=0}^{m−1} γʲ r_{k+j}   (summed in float64, stored as float32)
//	discount = γᵐ·(1 − done)
//	s′ = the state after step k+m−1
//
// with m = n, or fewer when the episode ends first. The environment closes
// the position at the end of its window (sim.VecEnv), so a window's end
// is terminal: done = 1 and those transitions do not bootstrap. Pending
// steps (at most n−1 per environment between calls) are part of the
// checkpoint.
type nstep struct {
	n     int
	gamma float64
	// Per environment i, its pending steps oldest first at [i*n, i*n+len[i]).
	len    []int
	bar    []int32
	agent  []float32 // ×NumAgentFeatures
	action []int32   // ×3
	reward []float32
}

func newNStep(envs, n int, gamma float64) *nstep {
	return &nstep{
		n: n, gamma: gamma, len: make([]int, envs),
		bar: make([]int32, envs*n), agent: make([]float32, envs*n*market.NumAgentFeatures),
		action: make([]int32, envs*n*3), reward: make([]float32, envs*n),
	}
}

// push records env i's step (s, a, r → s′) and adds to sink every
// transition it completes; it returns how many it added.
func (q *nstep) push(sink Sink, i int, bar int32, agent []float32, a market.Action, r float32, nextBar int32, nextAgent []float32, done bool) (int, error) {
	const na = market.NumAgentFeatures
	k := i*q.n + q.len[i]
	q.bar[k] = bar
	copy(q.agent[k*na:(k+1)*na], agent)
	q.action[k*3], q.action[k*3+1], q.action[k*3+2] = int32(a.Dir), int32(a.Size), int32(a.Exit)
	q.reward[k] = r
	q.len[i]++
	added := 0
	for q.len[i] == q.n || (done && q.len[i] > 0) {
		if err := sink.Add(q.oldest(i, nextBar, nextAgent, done)); err != nil {
			return added, err
		}
		added++
		q.pop(i)
	}
	return added, nil
}

// oldest builds the transition of env i's oldest pending step, ending at
// the state (nextBar, nextAgent), terminal when done.
func (q *nstep) oldest(i int, nextBar int32, nextAgent []float32, done bool) replay.Transition {
	const na = market.NumAgentFeatures
	base := i * q.n
	var ret, disc float64 = 0, 1
	for j := 0; j < q.len[i]; j++ {
		ret += disc * float64(q.reward[base+j])
		disc *= q.gamma
	}
	if done {
		disc = 0
	}
	t := replay.Transition{
		Bar: q.bar[base], Return: float32(ret), Discount: float32(disc), NextBar: nextBar,
		Action: [3]int32{q.action[base*3], q.action[base*3+1], q.action[base*3+2]},
	}
	copy(t.Agent[:], q.agent[base*na:(base+1)*na])
	copy(t.NextAgent[:], nextAgent)
	return t
}

// pop drops env i's oldest pending step.
func (q *nstep) pop(i int) {
	const na = market.NumAgentFeatures
	base, l := i*q.n, q.len[i]
	copy(q.bar[base:base+l-1], q.bar[base+1:base+l])
	copy(q.agent[base*na:(base+l-1)*na], q.agent[(base+1)*na:(base+l)*na])
	copy(q.action[base*3:(base+l-1)*3], q.action[(base+1)*3:(base+l)*3])
	copy(q.reward[base:base+l-1], q.reward[base+1:base+l])
	q.len[i]--
}
