// Command margins replays the checkpoints of a training run with several
// greedy margins over flat (env.flat_margin, ADR 0014) and prints, for
// each epoch, margin and range (validation, test), the backtest's Sharpe,
// trades, turnover and exposure, and the distribution of the direction
// branch's advantage over flat, max(Q(short), Q(long)) − Q(flat), on the
// observations where the account was flat. It measures the noise of the
// estimated advantages that the margin guards against
// (docs/perf/learning-2026-12-01.md, "The no-signal target").
//
//	go run ./bench/learning/margins RUNDIR 0,0.05,0.1
//
// RUNDIR holds epoch-NNNNNN.safetensors files of one run (what `dqnflow
// train` and `learn-check` write); their config gives the data and ranges.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: margins RUNDIR MARGIN[,MARGIN...]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "margins:", err)
		os.Exit(1)
	}
}

func run(dir, list string) error {
	var margins []float64
	for _, f := range strings.Split(list, ",") {
		m, err := strconv.ParseFloat(f, 64)
		if err != nil || m < 0 {
			return fmt.Errorf("margin %q: want a number ≥ 0", f)
		}
		margins = append(margins, m)
	}
	files, err := filepath.Glob(filepath.Join(dir, "epoch-*.safetensors"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("%s: no epoch-*.safetensors files", dir)
	}
	slices.Sort(files)
	var ds *market.Dataset
	for _, f := range files {
		ck, _, err := checkpoint.Read(context.Background(), f, checkpoint.Options{})
		if err != nil {
			return err
		}
		cfg, err := trainer.CheckpointConfig(ck)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if ds == nil {
			if ds, err = market.Prepare(context.Background(), (prices.Source{}), cfg); err != nil {
				return err
			}
		}
		for _, m := range margins {
			c := cfg
			c.Env.FlatMargin = m
			ck.Meta[checkpoint.MetaConfig] = string(c.JSON())
			pol, err := policy.Load(ck)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			for _, rg := range []struct {
				name string
				r    market.Range
			}{{"valid", ds.Valid}, {"test", ds.Test}} {
				rec := &recorder{pol: pol, q: make([]float32, model.NumActions)}
				rep, err := sim.Backtest(ds, rg.r, rec)
				if err == nil {
					err = rec.err
				}
				if err != nil {
					return fmt.Errorf("%s, %s range: %w", f, rg.name, err)
				}
				a := rec.flatAdv
				slices.Sort(a)
				fmt.Printf("%s margin %.3f %-5s Sharpe %7.3f trades %4d turnover %7.1f exposure %5.1f%% | advantage over flat on %d flat bars: median %.3f, q90 %.3f, q99 %.3f, max %.3f\n",
					filepath.Base(f), m, rg.name, rep.Sharpe, rep.Trades, rep.Turnover, 100*rep.Exposure,
					len(a), quantile(a, 0.5), quantile(a, 0.9), quantile(a, 0.99), quantile(a, 1))
			}
		}
	}
	return nil
}

// recorder acts as the policy and records the direction's advantage over
// flat at every bar where the account is flat (agent feature 1, |position|,
// is 0).
type recorder struct {
	pol     *policy.Policy
	q       []float32
	flatAdv []float64
	err     error
}

func (r *recorder) Act(t int, obs []float32) market.Action {
	if err := r.pol.QValues(obs, 1, r.q); err != nil && r.err == nil {
		r.err = err
	}
	if obs[market.NumFeatures+1] == 0 {
		d := r.q[model.BranchOffset[0]:model.BranchOffset[1]]
		r.flatAdv = append(r.flatAdv, float64(max(d[0], d[2])-d[model.FlatDir]))
	}
	a := r.pol.Act(t, obs)
	if err := r.pol.Err(); err != nil && r.err == nil {
		r.err = err
	}
	return a
}

// quantile is the p-quantile of sorted x (nearest rank below), 0 when empty.
func quantile(x []float64, p float64) float64 {
	if len(x) == 0 {
		return 0
	}
	return x[int(p*float64(len(x)-1))]
}
