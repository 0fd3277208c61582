package devenv

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/step"
	"math/rand/v2"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// devMarket is a dataset's bars on the device (struct EnvMarket of
// kernels/env.cu): open, high, low, close and the ATR in float64, the
// normalised features in float32, the per-bar slippage (Dataset.Slip) in
// float64 when the dataset has it (else a null pointer: the instrument's
// constant, as market's sim.slipAt), and the instrument. A trainer uploads
// its dataset once; a backtest on another dataset uploads that one.
type devMarket struct {
	ds                                    *market.Dataset
	open, high, low, close, atr, features cuda.DevPtr
	slip                                  cuda.DevPtr // 0 when ds.Slip is nil
}

// newDevMarket uploads ds into allocations of bt; features, when not zero,
// is ds.Features already on the device (the replay buffer's copy).
func newDevMarket(c *cuda.Ctx, bt *device.Batch, ds *market.Dataset, features cuda.DevPtr) (*devMarket, error) {
	b := ds.Bars
	n := b.Len()
	if len(b.Open) != n || len(b.High) != n || len(b.Low) != n || len(ds.ATR) != n || len(ds.Features) != n*market.NumFeatures ||
		(ds.Slip != nil && len(ds.Slip) != n) {
		return nil, fmt.Errorf("dataset %q: bars, ATR, features and per-bar slippage have inconsistent lengths", b.Name)
	}
	m := &devMarket{ds: ds, features: features}
	m.open, m.high, m.low, m.close, m.atr = bt.Alloc(8*n), bt.Alloc(8*n), bt.Alloc(8*n), bt.Alloc(8*n), bt.Alloc(8*n)
	if ds.Slip != nil {
		m.slip = bt.Alloc(8 * n)
	}
	if features == 0 {
		m.features = bt.Alloc(4 * len(ds.Features))
	}
	if bt.Err != nil {
		return nil, bt.Err
	}
	for _, up := range []struct {
		p cuda.DevPtr
		v []float64
	}{{m.open, b.Open}, {m.high, b.High}, {m.low, b.Low}, {m.close, b.Close}, {m.atr, ds.ATR}, {m.slip, ds.Slip}} {
		if up.v == nil {
			continue
		}
		if err := cuda.Upload(c, up.p, up.v); err != nil {
			return nil, err
		}
	}
	if features == 0 {
		if err := cuda.Upload(c, m.features, ds.Features); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// words appends struct EnvMarket with the dataset's instrument (the
// training environment's).
func (m *devMarket) words(w *device.Words) { m.wordsWith(w, m.ds.Instrument) }

// wordsWith appends struct EnvMarket trading instrument in (a backtest's,
// market.TradedInstrument).
func (m *devMarket) wordsWith(w *device.Words, in market.Instrument) {
	w.Ptr(m.open).Ptr(m.high).Ptr(m.low).Ptr(m.close).Ptr(m.atr).Ptr(m.features).Ptr(m.slip)
	w.F64(in.TickSize).F64(in.SlippageTicks).F64(in.Commission).F64(in.PointValue).F64(in.SlippageBps).F64(in.CommissionBps)
	w.I64(int64(in.MaxContracts))
}

// Random streams of the device collector (kernels/env.cu): counter-based,
// keyed by the run's seed and the CPU collector's stream numbers, so they
// are as independent of each other as the CPU's but not the same draws.
func StreamKey(seed, stream uint64) uint64 { return Mix64(Mix64(seed) ^ stream*0x9e3779b97f4a7c15) }

// Mix64 is the splitmix64 finaliser of kernels/replay.cu.
func Mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// EnvCounters words (struct EnvCounters of kernels/env.cu).
const (
	ctrSteps = iota
	ctrEnvSteps
	ctrEpisodes
	ctrCursor
	ctrSize
	ctrAdded
	ctrCallEpisodes
	ctrRewardSum
	ctrWords
)

// devEnv is the state of N environments and their pending n-step steps in
// device memory (struct EnvArrays), with the collector's counters.
type devEnv struct {
	n, nstep    int
	r           market.Range
	episodeBars int
	WindowLen   int

	bar, start, end, pos, exit, held cuda.DevPtr // int32 [N]
	entry, stop, epReward            cuda.DevPtr // float64 [N]
	qlen, qbar, qagent, qaction      cuda.DevPtr // int32 [N], int32 [N×n], float32 [N×n×8], int32 [N×n×3]
	qreward                          cuda.DevPtr // float32 [N×n]
	ctr                              cuda.DevPtr // EnvCounters
}

func newDevEnv(bt *device.Batch, r market.Range, n, nstep, episodeBars int) *devEnv {
	e := &devEnv{n: n, nstep: nstep, r: r, episodeBars: episodeBars, WindowLen: min(episodeBars, r.Len())}
	for _, p := range []*cuda.DevPtr{&e.bar, &e.start, &e.end, &e.pos, &e.exit, &e.held, &e.qlen} {
		*p = bt.Alloc(4 * n)
	}
	for _, p := range []*cuda.DevPtr{&e.entry, &e.stop, &e.epReward} {
		*p = bt.Alloc(8 * n)
	}
	e.qbar, e.qagent, e.qaction, e.qreward = bt.Alloc(4*n*nstep), bt.Alloc(4*n*nstep*step.AgentW), bt.Alloc(4*n*nstep*3), bt.Alloc(4*n*nstep)
	e.ctr = bt.Alloc(8 * ctrWords)
	return e
}

// arrays appends struct EnvArrays.
func (e *devEnv) arrays(w *device.Words) {
	for _, p := range []cuda.DevPtr{e.bar, e.start, e.end, e.pos, e.exit, e.held, e.entry, e.stop, e.epReward,
		e.qlen, e.qbar, e.qagent, e.qaction, e.qreward} {
		w.Ptr(p)
	}
}

// State downloads the environments in the CPU collector's checkpoint form.
// The random streams' tensors are filled by the caller (deviceStreams).
func (e *devEnv) State(c *cuda.Ctx) (rollout.State, error) {
	n, ns := e.n, e.nstep
	i32 := func(p cuda.DevPtr, k int) ([]int32, error) {
		v := make([]int32, k)
		return v, cuda.Download(c, v, p)
	}
	wide := func(v []int32) []int64 {
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out
	}
	ctr := make([]int64, ctrWords)
	if err := cuda.Download(c, ctr, e.ctr); err != nil {
		return rollout.State{}, err
	}
	s := rollout.State{N: ns, EnvSteps: ctr[ctrEnvSteps], Env: sim.EnvState{
		From: int64(e.r.From), To: int64(e.r.To), EpisodeBars: int64(e.episodeBars), Episodes: ctr[ctrEpisodes],
		Entry: make([]float64, n), Stop: make([]float64, n), EpReward: make([]float64, n)}}
	for _, x := range []struct {
		p   cuda.DevPtr
		dst *[]int64
	}{{e.bar, &s.Env.Bar}, {e.start, &s.Env.Start}, {e.end, &s.Env.End}, {e.pos, &s.Env.Position}, {e.exit, &s.Env.Exit}, {e.held, &s.Env.Held}, {e.qlen, &s.Len}} {
		v, err := i32(x.p, n)
		if err != nil {
			return s, err
		}
		*x.dst = wide(v)
	}
	for _, x := range []struct {
		p cuda.DevPtr
		v []float64
	}{{e.entry, s.Env.Entry}, {e.stop, s.Env.Stop}, {e.epReward, s.Env.EpReward}} {
		if err := cuda.Download(c, x.v, x.p); err != nil {
			return s, err
		}
	}
	var err error
	if s.Bar, err = i32(e.qbar, n*ns); err != nil {
		return s, err
	}
	if s.Action, err = i32(e.qaction, n*ns*3); err != nil {
		return s, err
	}
	s.Agent, s.Reward = make([]float32, n*ns*step.AgentW), make([]float32, n*ns)
	if err := cuda.Download(c, s.Agent, e.qagent); err != nil {
		return s, err
	}
	return s, cuda.Download(c, s.Reward, e.qreward)
}

// check validates s for these environments on ds, as the CPU collector's
// Load does (sim.VecEnv.SetState names the field and the env), and
// that the step count is whole collector steps (the streams' counter).
func (e *devEnv) check(ds *market.Dataset, s rollout.State) error {
	v, err := sim.NewVecEnv(ds, e.r, e.n, e.episodeBars, rand.New(rand.NewPCG(0, 0)))
	if err != nil {
		return err
	}
	if err := v.SetState(s.Env); err != nil {
		return err
	}
	if s.EnvSteps%int64(e.n) != 0 {
		return fmt.Errorf("tensor %s: %d environment steps is not a whole number of steps of %d environments", rollout.TensorEnvSteps, s.EnvSteps, e.n)
	}
	if len(s.Len) != e.n || len(s.Bar) != e.n*e.nstep || len(s.Agent) != e.n*e.nstep*step.AgentW ||
		len(s.Action) != e.n*e.nstep*3 || len(s.Reward) != e.n*e.nstep {
		return fmt.Errorf("load collector: n-step queue shaped for another env.num_envs or optim.n_step (want %d envs, n %d)", e.n, e.nstep)
	}
	return nil
}

// setState uploads s (checked by check) and sets the counters of the
// random streams: step s.EnvSteps/N.
func (e *devEnv) setState(c *cuda.Ctx, s rollout.State) error {
	narrow := func(v []int64) []int32 {
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	}
	for _, x := range []struct {
		p cuda.DevPtr
		v []int64
	}{{e.bar, s.Env.Bar}, {e.start, s.Env.Start}, {e.end, s.Env.End}, {e.pos, s.Env.Position}, {e.exit, s.Env.Exit}, {e.held, s.Env.Held}, {e.qlen, s.Len}} {
		if err := cuda.Upload(c, x.p, narrow(x.v)); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		p cuda.DevPtr
		v []float64
	}{{e.entry, s.Env.Entry}, {e.stop, s.Env.Stop}, {e.epReward, s.Env.EpReward}} {
		if err := cuda.Upload(c, x.p, x.v); err != nil {
			return err
		}
	}
	for _, err := range []error{cuda.Upload(c, e.qbar, s.Bar), cuda.Upload(c, e.qaction, s.Action),
		cuda.Upload(c, e.qagent, s.Agent), cuda.Upload(c, e.qreward, s.Reward)} {
		if err != nil {
			return err
		}
	}
	return cuda.Upload(c, e.ctr, []int64{s.EnvSteps / int64(e.n), s.EnvSteps, s.Env.Episodes})
}

// deviceStreams fills the rng.env and rng.explore tensors of a device
// checkpoint. The device's streams are counter-based and need no state
// (their counter is trainer.env_steps); the tensors hold PCG states seeded
// from (seed ^ env steps, stream), so the CPU backend, which needs PCG
// states, resumes a device checkpoint with fresh streams of its own, and
// two device checkpoints of the same state are equal bit for bit.
func deviceStreams(cfg config.RunConfig, s *rollout.State) error {
	for _, r := range []struct {
		stream uint64
		dst    *[]byte
	}{{rollout.StreamEnv, &s.RNGEnv}, {rollout.StreamExplore, &s.RNGExplore}} {
		b, err := rand.NewPCG(cfg.Seed^uint64(s.EnvSteps), r.stream).MarshalBinary()
		if err != nil {
			return err
		}
		*r.dst = b
	}
	return nil
}
