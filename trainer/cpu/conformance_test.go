package cpu_test

import (
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

func TestConformanceFP32(t *testing.T) {
	trainertest.Run(t, cpu.Backend{}, "cpu", config.PrecisionFP32)
}

func TestConformanceBF16Mixed(t *testing.T) {
	trainertest.Run(t, cpu.Backend{}, "cpu", config.PrecisionBF16Mixed)
}
