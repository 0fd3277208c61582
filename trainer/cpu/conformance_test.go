package cpu_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/dqnflow/dqnflow/blas"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// blasNames are the BLAS the suites run on here: gonum always, OpenBLAS
// when it opens. With DQNFLOW_REQUIRE_OPENBLAS=1 (CI installs it) a
// missing OpenBLAS on Linux fails instead.
func blasNames(t *testing.T) []string {
	t.Helper()
	names := []string{blas.NameGonum}
	_, err := blas.Open(blas.NameOpenBLAS, 0)
	switch {
	case err == nil:
		names = append(names, blas.NameOpenBLAS)
	case os.Getenv("DQNFLOW_REQUIRE_OPENBLAS") == "1" && runtime.GOOS == "linux":
		t.Fatalf("DQNFLOW_REQUIRE_OPENBLAS=1: %v", err)
	default:
		t.Logf("OpenBLAS is not tested: %v", err)
	}
	return names
}

func TestConformanceFP32(t *testing.T) { conformOnEveryBLAS(t, config.PrecisionFP32) }

func TestConformanceBF16Mixed(t *testing.T) { conformOnEveryBLAS(t, config.PrecisionBF16Mixed) }

// conformOnEveryBLAS runs the suite at precision on every BLAS of
// blasNames, a subtest each.
func conformOnEveryBLAS(t *testing.T, precision string) {
	for _, name := range blasNames(t) {
		t.Run(name, func(t *testing.T) {
			cfg := trainertest.SmallConfig()
			cfg.Device, cfg.Precision, cfg.BLAS = "cpu", precision, name
			trainertest.RunConfig(t, cpu.Backend{}, cfg)
		})
	}
}

// TestConformanceBF16 runs the suite on the bf16 emulation, with and
// without stochastic rounding.
func TestConformanceBF16(t *testing.T) {
	for _, sr := range []bool{false, true} {
		t.Run(map[bool]string{false: "nearest", true: "stochastic"}[sr], func(t *testing.T) {
			cfg := trainertest.SmallConfig()
			cfg.Device, cfg.Precision, cfg.BLAS = "cpu", config.PrecisionBF16, blas.NameGonum
			cfg.Optim.StochasticRounding = sr
			trainertest.RunConfig(t, cpu.Backend{}, cfg)
		})
	}
}

// TestConformanceMirrored runs the suite with data.mirror: the collector
// plays the joined training set and the replay buffer's bars index it, so
// resume and same-seed runs must stay bit-identical there too.
func TestConformanceMirrored(t *testing.T) {
	cfg := trainertest.SmallConfig()
	cfg.Device, cfg.Precision, cfg.BLAS = "cpu", config.PrecisionFP32, blas.NameGonum
	cfg.Data.Mirror = true
	trainertest.RunConfig(t, cpu.Backend{}, cfg)
}

// TestPopulation runs the population suite on the CPU backend's loop of
// single trainers (issue 47).
func TestPopulation(t *testing.T) {
	trainertest.RunPopulation(t, cpu.Backend{}, cpu.Backend{}, "cpu", config.PrecisionFP32)
}
