package cpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// Tensors of the trainer's own state, beside the learner's
// (model.State.Tensors), the collector's (rollout.Collector.Tensors) and
// the replay buffer's ("replay." + replay tensor names).
// docs/checkpoint-format.md documents each.
const (
	replayPrefix = "replay."
	tRNGSample   = "rng.sample" // U8: PCG state (math/rand/v2 MarshalBinary)
)

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
	for k, v := range trainer.Origin(t.Info()) {
		meta[k] = v
	}
	ts := t.learner.Tensors()
	ts = append(ts, t.buf.Tensors(replayPrefix)...)
	cts, err := t.collector.Tensors()
	if err != nil {
		return nil, err
	}
	ts = append(ts, cts...)
	b, err := t.samplePCG.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", tRNGSample, err)
	}
	ts = append(ts, checkpoint.U8Tensor(tRNGSample, []int{len(b)}, b))
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
	// A checkpoint of a CUDA run restores here too: the state is the same
	// on every backend, and Info (recorded with the run) says it is the CPU.
	cfg.Device = "cpu"
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
	if !market.SameContract(inst, ds.Instrument) {
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
	if err := t.collector.Load(ck); err != nil {
		return err
	}
	tn, ok := ck.Find(tRNGSample)
	if !ok || tn.DType != checkpoint.U8 {
		return fmt.Errorf("tensor %s: missing or not U8", tRNGSample)
	}
	if err := t.samplePCG.UnmarshalBinary(tn.Data); err != nil {
		return fmt.Errorf("tensor %s: %w", tRNGSample, err)
	}
	return nil
}

// warmStart loads the online and target weights of ck (a checkpoint of a
// run with the same model) into a fresh trainer.
func (t *Trainer) warmStart(ck *checkpoint.Checkpoint) error {
	m := t.cfg.Model
	for _, net := range []struct {
		prefix string
		n      *Net
	}{{model.PrefixOnline, t.learner.online}, {model.PrefixTarget, t.learner.target}} {
		p, err := model.ReadParams(ck, net.prefix, m)
		if err != nil {
			if errors.Is(err, model.ErrNotFinite) {
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
