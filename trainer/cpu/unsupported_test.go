package cpu_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// TestRefusesWhatItCannotRun: a CUDA device is an error wrapping
// trainer.ErrUnsupported, never a silent CPU run.
func TestRefusesWhatItCannotRun(t *testing.T) {
	base := trainertest.SmallConfig()
	ds, err := market.Prepare(context.Background(), prices.Source{}, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ device, precision string }{
		{"cuda", config.PrecisionFP32}, {"cuda:1", config.PrecisionBF16Mixed}, {"cuda", config.PrecisionBF16},
	} {
		cfg := base
		cfg.Device, cfg.Precision = c.device, c.precision
		tr, err := cpu.Backend{}.New(context.Background(), cfg, ds, nil)
		if !errors.Is(err, trainer.ErrUnsupported) {
			if tr != nil {
				tr.Close()
			}
			t.Errorf("device %s precision %s: New returned %v, want an error wrapping trainer.ErrUnsupported", c.device, c.precision, err)
		}
	}
}
