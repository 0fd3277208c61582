package cpu_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/faults"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// TestPopulationLoopSortsErrors: in a loop population (trainer.NewLoop)
// an ErrNonFinite stops its member alone, while any other error, here a
// device failure, is the call's error and names the member. Train calls
// run member by member, so the faults plan's call numbers pick them.
func TestPopulationLoopSortsErrors(t *testing.T) {
	cfgs := trainertest.PopulationConfigs("cpu", config.PrecisionFP32)
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		plan faults.Plan
	}{
		{"nan", faults.Plan{NaNOnTrain: 2}},
		{"device", faults.Plan{DeviceErrorOnTrain: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := trainer.NewLoop(ctx, &faults.Backend{Backend: cpu.Backend{}, Plan: tc.plan}, cfgs, ds, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if _, err := p.Collect(ctx, cfgs[0].Env.CollectSteps); err != nil {
				t.Fatal(err)
			}
			st, err := p.Train(ctx, cfgs[0].StepsPerEpoch, nil)
			stopped := p.Stopped()
			if tc.plan.NaNOnTrain != 0 {
				if err != nil || !errors.Is(stopped[1], trainer.ErrNonFinite) || stopped[0] != nil || stopped[2] != nil {
					t.Fatalf("Train: %v, stopped %v; want no error and member 1 alone stopped", err, stopped)
				}
				if st[0].Steps != cfgs[0].StepsPerEpoch || st[1].Steps != 0 || st[2].Steps != cfgs[2].StepsPerEpoch {
					t.Errorf("steps %d, %d, %d; want %d, 0, %d", st[0].Steps, st[1].Steps, st[2].Steps, cfgs[0].StepsPerEpoch, cfgs[2].StepsPerEpoch)
				}
				return
			}
			if !errors.Is(err, trainer.ErrDevice) || !strings.Contains(err.Error(), "population member 1") {
				t.Errorf("Train with member 1's device failing: %v, want an error wrapping ErrDevice naming member 1", err)
			}
			for k, e := range stopped {
				if e != nil {
					t.Errorf("member %d stopped by a device error: %v", k, e)
				}
			}
		})
	}
}
