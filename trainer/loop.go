package trainer

import (
	"context"
	"errors"
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
)

// loop is a Population that runs its members one after the other, each a
// Trainer of its backend: member k is its single Trainer, so it computes
// that Trainer's bits by construction. It pays every member's launches,
// so a backend with batched kernels has a Population of its own.
type loop struct {
	members []Trainer
	stopped []error
	info    Info
	closed  bool
}

// NewLoop builds a population of len(cfgs) members on ds that runs them
// one after the other, member k the Trainer b.New(ctx, cfgs[k], ds,
// warm[k]) (see PopulationBackend.NewPopulation). The CPU backend's
// populations are these.
func NewLoop(ctx context.Context, b Backend, cfgs []config.RunConfig, ds *market.Dataset, warm []*checkpoint.Checkpoint) (Population, error) {
	if err := config.ValidatePopulation(cfgs); err != nil {
		return nil, err
	}
	if warm != nil && len(warm) != len(cfgs) {
		return nil, fmt.Errorf("population: %d warm checkpoints for %d members: give one a member (nil for a fresh one) or none", len(warm), len(cfgs))
	}
	return newLoop(len(cfgs), func(k int) (Trainer, error) {
		var w *checkpoint.Checkpoint
		if warm != nil {
			w = warm[k]
		}
		return b.New(ctx, cfgs[k], ds, w)
	})
}

// RestoreLoop rebuilds, from its members' checkpoints, a population that
// runs them one after the other, member k b.Restore(ctx, cks[k], ds) (see
// PopulationBackend.RestorePopulation).
func RestoreLoop(ctx context.Context, b Backend, cks []*checkpoint.Checkpoint, ds *market.Dataset) (Population, error) {
	cfgs := make([]config.RunConfig, len(cks))
	for k, ck := range cks {
		if ck == nil {
			return nil, fmt.Errorf("population member %d: no checkpoint", k)
		}
		var err error
		if cfgs[k], err = CheckpointConfig(ck); err != nil {
			return nil, fmt.Errorf("population member %d: %w", k, err)
		}
	}
	if err := config.ValidatePopulation(cfgs); err != nil {
		return nil, err
	}
	return newLoop(len(cks), func(k int) (Trainer, error) { return b.Restore(ctx, cks[k], ds) })
}

// newLoop makes the n members with member, closing those it made when one
// fails.
func newLoop(n int, member func(k int) (Trainer, error)) (Population, error) {
	p := &loop{members: make([]Trainer, n), stopped: make([]error, n)}
	for k := range n {
		tr, err := member(k)
		if err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("population member %d: %w", k, err)
		}
		p.members[k] = tr
	}
	p.info = p.members[0].Info()
	return p, nil
}

// each calls f for every live member in order and returns the results,
// the zero S for a stopped member. A member whose call fails with
// ErrNonFinite stops (its error recorded, its trainer closed); any other
// error ends the call, naming the member.
func each[S any](ctx context.Context, p *loop, f func(k int, tr Trainer) (S, error)) ([]S, error) {
	out := make([]S, len(p.members))
	if p.closed {
		return out, errors.New("population: used after Close")
	}
	for k, tr := range p.members {
		if p.stopped[k] != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		s, err := f(k, tr)
		switch {
		case errors.Is(err, ErrNonFinite):
			p.stopped[k] = err
			_ = tr.Close()
		case err != nil:
			return out, fmt.Errorf("population member %d: %w", k, err)
		default:
			out[k] = s
		}
	}
	return out, nil
}

func (p *loop) Info() Info { return p.info }

func (p *loop) Len() int { return len(p.members) }

func (p *loop) Stopped() []error { return append([]error(nil), p.stopped...) }

func (p *loop) Collect(ctx context.Context, steps int) ([]CollectStats, error) {
	return each(ctx, p, func(_ int, tr Trainer) (CollectStats, error) { return tr.Collect(ctx, steps) })
}

func (p *loop) Train(ctx context.Context, steps int, progress func(member int, pr Progress)) ([]TrainStats, error) {
	return each(ctx, p, func(k int, tr Trainer) (TrainStats, error) {
		var f func(Progress)
		if progress != nil {
			f = func(pr Progress) { progress(k, pr) }
		}
		return tr.Train(ctx, steps, f)
	})
}

func (p *loop) SyncTarget() error {
	_, err := each(context.Background(), p, func(_ int, tr Trainer) (struct{}, error) { return struct{}{}, tr.SyncTarget() })
	return err
}

func (p *loop) Backtest(ctx context.Context, ds *market.Dataset, r market.Range) ([]sim.Report, error) {
	return each(ctx, p, func(_ int, tr Trainer) (sim.Report, error) { return tr.Backtest(ctx, ds, r) })
}

func (p *loop) Snapshot(member int) (*checkpoint.Checkpoint, error) {
	switch {
	case p.closed:
		return nil, errors.New("population: used after Close")
	case member < 0 || member >= len(p.members):
		return nil, fmt.Errorf("population: snapshot of member %d of %d", member, len(p.members))
	case p.stopped[member] != nil:
		return nil, fmt.Errorf("population member %d stopped: %w", member, p.stopped[member])
	}
	return p.members[member].Snapshot()
}

func (p *loop) Close() error {
	var errs []error
	for k, tr := range p.members {
		if tr != nil && p.stopped[k] == nil {
			if err := tr.Close(); err != nil {
				errs = append(errs, fmt.Errorf("population member %d: close: %w", k, err))
			}
		}
	}
	p.closed = true
	return errors.Join(errs...)
}
