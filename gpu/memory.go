package gpu

import (
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/trainer"
)

var _ trainer.MemoryReporter = (*Trainer)(nil)

// DeviceMemory reports the device's memory in use (all contexts, not only
// this trainer's) and in all, from cuMemGetInfo on the device's thread.
func (t *Trainer) DeviceMemory() (used, total uint64, err error) {
	err = t.b.d.Dev.Do(func(c *cuda.Ctx) error {
		free, all, err := c.MemGetInfo()
		used, total = all-free, all
		return err
	})
	return used, total, err
}
