package gpu_test

import (
	"context"
	"testing"

	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// TestDeviceMemoryIsReported: the CUDA trainer reports device memory for
// the worker's metrics: some in use (its own buffers at least), no more
// than the device has.
func TestDeviceMemoryIsReported(t *testing.T) {
	b := backend(t)
	cfg := trainertest.SmallConfig()
	cfg.Device = "cuda"
	ds := prepared(t, cfg)
	tr, err := b.New(context.Background(), cfg, ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	m, ok := tr.(trainer.MemoryReporter)
	if !ok {
		t.Fatal("the CUDA trainer does not implement trainer.MemoryReporter")
	}
	used, total, err := m.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device memory: %d MiB used of %d MiB", used>>20, total>>20)
	if used == 0 || total < used || total < 1<<30 {
		t.Errorf("device memory %d used of %d: want some in use, at most the total, a total of at least 1 GiB", used, total)
	}
	st, err := tr.Train(context.Background(), 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.MeanQ != nil {
		t.Logf("mean Q %v", *st.MeanQ)
	}
}
