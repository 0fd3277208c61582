package cpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
)

// Tensors of the trainer's own state, beside the Learner's (Learner.Tensors)
// and the replay buffer's ("replay." + replay tensor names).
// docs/checkpoint-format.md documents each.
const (
	replayPrefix = "replay."
	tEnvSteps    = "trainer.env_steps" // I64 [1]
	tEnvMeta     = "env.meta"          // I64 [4]: range from, range to, episode bars, episodes done
	tRNGEnv      = "rng.env"           // U8: PCG state (math/rand/v2 MarshalBinary)
	tRNGExplore  = "rng.explore"
	tRNGSample   = "rng.sample"
	tNStepLen    = "nstep.len"    // I64 [N]
	tNStepBar    = "nstep.bar"    // I32 [N, n]
	tNStepAgent  = "nstep.agent"  // F32 [N, n, 8]
	tNStepAction = "nstep.action" // I32 [N, n, 3]
	tNStepReward = "nstep.reward" // F32 [N, n]
)

// envInts and envFloats name the per-environment state tensors ("env."+name,
// shape [N]) and where they live in market.EnvState.
func envInts(s *market.EnvState) map[string]*[]int64 {
	return map[string]*[]int64{"env.bar": &s.Bar, "env.start": &s.Start, "env.end": &s.End,
		"env.position": &s.Position, "env.exit": &s.Exit, "env.held": &s.Held}
}

func envFloats(s *market.EnvState) map[string]*[]float64 {
	return map[string]*[]float64{"env.entry": &s.Entry, "env.stop": &s.Stop, "env.ep_reward": &s.EpReward}
}

var envIntNames = []string{"env.bar", "env.start", "env.end", "env.position", "env.exit", "env.held"}
var envFloatNames = []string{"env.entry", "env.stop", "env.ep_reward"}

// Snapshot copies the whole trainer state: weights, optimiser, spectral
// vectors, replay buffer, environments, pending n-step transitions and the
// random streams, with the config, instrument and feature normalisation in
// the metadata so that the file alone can run the policy on any data.
func (t *Trainer) Snapshot() (*checkpoint.Checkpoint, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	meta := map[string]string{
		checkpoint.MetaFormat:     checkpoint.FormatVersion,
		checkpoint.MetaBackend:    "cpu",
		checkpoint.MetaPrecision:  t.learner.Online().Precision(),
		checkpoint.MetaGlobalStep: strconv.FormatInt(t.learner.Steps(), 10),
		checkpoint.MetaConfig:     string(mustJSON(t.cfg)),
		checkpoint.MetaInstrument: string(mustJSON(t.ds.Instrument)),
		checkpoint.MetaNormalizer: string(mustJSON(t.ds.Norm)),
	}
	ts := t.learner.Tensors()
	ts = append(ts, t.buf.Tensors(replayPrefix)...)

	es := t.env.State()
	n := int64(len(es.Bar))
	ts = append(ts, checkpoint.I64Tensor(tEnvMeta, []int{4}, []int64{es.From, es.To, es.EpisodeBars, es.Episodes}))
	ints, floats := envInts(&es), envFloats(&es)
	for _, name := range envIntNames {
		ts = append(ts, checkpoint.I64Tensor(name, []int{int(n)}, *ints[name]))
	}
	for _, name := range envFloatNames {
		ts = append(ts, checkpoint.F64Tensor(name, []int{int(n)}, *floats[name]))
	}

	q := t.nstep
	envs, ns := len(q.len), q.n
	lens := make([]int64, envs)
	for i, l := range q.len {
		lens[i] = int64(l)
	}
	ts = append(ts,
		checkpoint.I64Tensor(tNStepLen, []int{envs}, lens),
		checkpoint.I32Tensor(tNStepBar, []int{envs, ns}, q.bar),
		checkpoint.F32Tensor(tNStepAgent, []int{envs, ns, market.NumAgentFeatures}, q.agent),
		checkpoint.I32Tensor(tNStepAction, []int{envs, ns, 3}, q.action),
		checkpoint.F32Tensor(tNStepReward, []int{envs, ns}, q.reward),
		checkpoint.I64Tensor(tEnvSteps, []int{1}, []int64{t.envSteps}),
	)
	for _, r := range []struct {
		name string
		pcg  *rand.PCG
	}{{tRNGEnv, t.envPCG}, {tRNGExplore, t.explorePCG}, {tRNGSample, t.samplePCG}} {
		b, err := r.pcg.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", r.name, err)
		}
		ts = append(ts, checkpoint.U8Tensor(r.name, []int{len(b)}, b))
	}
	return &checkpoint.Checkpoint{Meta: meta, Tensors: ts}, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // plain structs of numbers and strings
	}
	return b
}

// Restore rebuilds the trainer saved in ck on ds; see trainer.Backend. ds
// must be the dataset the run trained on: its instrument and feature
// normalisation must equal the checkpoint's.
func (Backend) Restore(_ context.Context, ck *checkpoint.Checkpoint, ds *market.Dataset) (trainer.Trainer, error) {
	cfg, err := trainer.CheckpointConfig(ck)
	if err != nil {
		return nil, err
	}
	if err := sameDataset(ck, ds); err != nil {
		return nil, err
	}
	t, err := build(cfg, ds)
	if err != nil {
		return nil, err
	}
	if err := t.load(ck); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	return t, nil
}

// sameDataset checks that ds has the instrument and normalisation stored
// in ck, so that restored replay transitions mean what they meant.
func sameDataset(ck *checkpoint.Checkpoint, ds *market.Dataset) error {
	inst, norm, err := trainer.CheckpointMarket(ck)
	if err != nil {
		return err
	}
	if inst != ds.Instrument {
		return fmt.Errorf("dataset instrument %+v differs from the checkpoint's %+v: prepare the data with the checkpoint's config", ds.Instrument, inst)
	}
	if !reflect.DeepEqual(norm, ds.Norm) {
		return fmt.Errorf("dataset feature normalisation differs from the checkpoint's: prepare the data with the checkpoint's config (same file and ranges)")
	}
	return nil
}

// load replaces the state of a freshly built trainer with ck's.
func (t *Trainer) load(ck *checkpoint.Checkpoint) error {
	if err := t.learner.LoadTensors(ck); err != nil {
		return err
	}
	if err := t.buf.Load(ck, replayPrefix); err != nil {
		return err
	}
	n := t.env.N()
	em, err := ck.I64(tEnvMeta, 4)
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
	if err := t.env.SetState(es); err != nil {
		return err
	}
	if err := t.loadNStep(ck); err != nil {
		return err
	}
	steps, err := ck.I64(tEnvSteps, 1)
	if err != nil {
		return err
	}
	if steps[0] < 0 {
		return fmt.Errorf("tensor %s: %d is negative", tEnvSteps, steps[0])
	}
	t.envSteps = steps[0]
	for _, r := range []struct {
		name string
		pcg  *rand.PCG
	}{{tRNGEnv, t.envPCG}, {tRNGExplore, t.explorePCG}, {tRNGSample, t.samplePCG}} {
		tn, ok := ck.Find(r.name)
		if !ok || tn.DType != checkpoint.U8 {
			return fmt.Errorf("tensor %s: missing or not U8", r.name)
		}
		if err := r.pcg.UnmarshalBinary(tn.Data); err != nil {
			return fmt.Errorf("tensor %s: %w", r.name, err)
		}
	}
	return nil
}

func (t *Trainer) loadNStep(ck *checkpoint.Checkpoint) error {
	q := t.nstep
	envs, ns := len(q.len), q.n
	lens, err := ck.I64(tNStepLen, envs)
	if err != nil {
		return err
	}
	for i, l := range lens {
		if l < 0 || l >= int64(ns) {
			return fmt.Errorf("tensor %s: env %d has %d pending steps, want [0, %d)", tNStepLen, i, l, ns)
		}
	}
	bar, err := ck.I32(tNStepBar, envs, ns)
	if err != nil {
		return err
	}
	agent, err := ck.F32(tNStepAgent, envs, ns, market.NumAgentFeatures)
	if err != nil {
		return err
	}
	action, err := ck.I32(tNStepAction, envs, ns, 3)
	if err != nil {
		return err
	}
	reward, err := ck.F32(tNStepReward, envs, ns)
	if err != nil {
		return err
	}
	for i, l := range lens {
		q.len[i] = int(l)
	}
	copy(q.bar, bar)
	copy(q.agent, agent)
	copy(q.action, action)
	copy(q.reward, reward)
	return nil
}

// warmStart loads the online and target weights of ck (a checkpoint of a
// run with the same model) into a fresh trainer.
func (t *Trainer) warmStart(ck *checkpoint.Checkpoint) error {
	idx, err := indexTensors(ck)
	if err != nil {
		return err
	}
	m := t.cfg.Model
	for _, net := range []struct {
		prefix string
		n      *Net
	}{{"online.", t.learner.online}, {"target.", t.learner.target}} {
		p := make([]float32, len(net.n.params))
		if err := readParams(idx, net.prefix, m, p); err != nil {
			if errors.Is(err, errNotFinite) {
				return fmt.Errorf("%w: %w", trainer.ErrNonFinite, err)
			}
			return err
		}
		if err := net.n.SetParams(p); err != nil {
			return err
		}
	}
	return nil
}
