// Package policy loads the greedy policy saved in a checkpoint and runs it
// on the CPU, whatever backend and precision wrote the checkpoint: it is
// the one path of `dqnflow backtest`, `dqnflow predict` and the
// EvaluateCheckpoints activity. The CPU network of trainer/cpu is the
// reference evaluator; nothing here needs a GPU.
package policy

import (
	"errors"
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// Policy is the greedy policy of a checkpoint's online network: in each
// branch the action with the highest expected value Σ_j p_j z_j (the first
// one on ties), flat unless the direction beats flat by the config's
// margin (model.Greedy, env.flat_margin). It is not safe for concurrent use.
type Policy struct {
	net       *cpu.Net
	precision string
	err       error // the first error of Act, reported by Err
	acts      [1]market.Action
}

// Load builds the greedy policy of the online network saved in ck, a
// training checkpoint of any backend (the metadata's backend is not
// consulted) or a file of `dqnflow checkpoint export` (f32 or bf16
// weights without the "online." prefix). The model comes from the config
// in ck's metadata.
//
// It evaluates in the precision the run trained in (metadata precision,
// else the config's) when the CPU runs it: fp32 or bf16-mixed. A "bf16"
// run (bf16 storage everywhere) is evaluated in bf16-mixed, whose forward
// pass is the same: the weights (already bf16 values in such a run) and
// the activations entering each GEMM are rounded to bf16, accumulation
// and the head are float32. Precision reports the mode used.
func Load(ck *checkpoint.Checkpoint) (*Policy, error) {
	cfg, err := trainer.CheckpointConfig(ck)
	if err != nil {
		return nil, err
	}
	prefix := model.PrefixOnline
	if _, ok := ck.Find(prefix + model.Layout(cfg.Model)[0].Name); !ok {
		prefix = "" // an exported file
	}
	p, err := model.ReadParams(ck, prefix, cfg.Model)
	if errors.Is(err, model.ErrNotFinite) {
		return nil, fmt.Errorf("policy: %w: %w", trainer.ErrNonFinite, err)
	}
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	precision := ck.Meta[checkpoint.MetaPrecision]
	if precision == "" {
		precision = cfg.Precision
	}
	if precision == config.PrecisionBF16 {
		precision = config.PrecisionBF16Mixed
	}
	net, err := cpu.NewNet(cfg.Model, precision, 0)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := net.SetParams(p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := net.SetGreedyMargin(cfg.GreedyMargin()); err != nil {
		return nil, fmt.Errorf("policy: env.flat_margin: %w", err)
	}
	return &Policy{net: net, precision: precision}, nil
}

// Precision is the precision mode the policy evaluates in.
func (p *Policy) Precision() string { return p.precision }

// Margin is the greedy margin over flat in Q units
// (config.RunConfig.GreedyMargin of the checkpoint's config).
func (p *Policy) Margin() float32 { return p.net.GreedyMargin() }

// Greedy writes the greedy action of each of the rows observations in obs
// to dst (see rollout.Greedy).
func (p *Policy) Greedy(obs []float32, rows int, dst []market.Action) error {
	return p.net.Greedy(obs, rows, dst)
}

// Act returns the greedy action for one observation; it implements
// sim.Policy. sim.Policy has no error result, so a failure (a
// malformed observation) is kept for Err and the action is flat.
func (p *Policy) Act(_ int, obs []float32) market.Action {
	if err := p.net.Greedy(obs, 1, p.acts[:]); err != nil {
		if p.err == nil {
			p.err = err
		}
		return market.Action{Dir: 1}
	}
	return p.acts[0]
}

// Err returns the first error Act met, or nil.
func (p *Policy) Err() error { return p.err }

// Backtest runs the policy over bars r of ds (rollout.Backtest); an error
// of the network fails it.
func (p *Policy) Backtest(ds *market.Dataset, r market.Range) (sim.Report, error) {
	return rollout.Backtest(ds, r, p.net.Greedy)
}

// QValues writes the expected Q of every action of every branch for rows
// observations: rows × (3 + 4 + 3) values, branch by branch.
func (p *Policy) QValues(obs []float32, rows int, dst []float32) error {
	return p.net.QValues(obs, rows, dst)
}
